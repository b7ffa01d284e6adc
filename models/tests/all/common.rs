//! What the seed tests share: a deterministic PRNG and the committed fuzz inputs.

/// xorshift64*: a tiny deterministic PRNG, so failures reproduce by seed.
pub struct XorShift(pub u64);

impl XorShift {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Runs every committed input of a fuzz target through `run`: its seeds
/// (`fuzz/seeds/<target>/`) and the inputs a campaign once crashed on
/// (`fuzz/regressions/<target>/`, if any), in name order. A failing input is named on
/// stderr. Returns how many ran.
pub fn run_committed_fuzz_inputs(target: &str, run: impl Fn(&[u8])) -> usize {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut inputs = 0;
    for dir in ["seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            assert_eq!(dir, "regressions", "{target} has no committed seeds");
            continue;
        };
        let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        files.sort();
        for file in files {
            let bytes = std::fs::read(&file).unwrap();
            let _report = NamedInput(&file);
            run(&bytes);
            inputs += 1;
        }
    }
    inputs
}

/// Names the failing input file when a run panics.
struct NamedInput<'a>(&'a std::path::Path);

impl Drop for NamedInput<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failing input: {}", self.0.display());
        }
    }
}
