//! The capture reader's interpreter (`cmdlist_models::capture_reader`) on stable: the
//! committed seeds, each cut at every byte and with every byte flipped, and random bytes
//! from a fixed-seed PRNG.

use cmdlist_models::capture_reader::run;

use crate::common::XorShift;

fn seeds() -> Vec<Vec<u8>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/seeds/capture_reader");
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .expect("the seeds' directory")
        .map(|e| std::fs::read(e.expect("an entry").path()).expect("a seed"))
        .collect();
    assert!(seeds.len() >= 2, "the committed seeds");
    seeds.sort();
    seeds
}

#[test]
fn committed_seeds_cut_and_flipped_read_exactly_what_they_hold() {
    for seed in seeds() {
        for cut in 0..=seed.len() {
            run(&seed[..cut]);
        }
        for at in 0..seed.len() {
            let mut bad = seed.clone();
            bad[at] ^= 0x5a;
            run(&bad);
        }
    }
}

#[test]
fn random_bytes_read_exactly_what_they_hold() {
    let mut rng = XorShift(0xC0FF_EE00_D15E_A5E5);
    for _ in 0..2000 {
        let len = rng.next() as usize % 256;
        run(&rng.bytes(len));
    }
}

/// Random payloads decoded as soft commands: an error, or a command that is the bytes read.
#[test]
fn random_payloads_decode_as_commands_or_errors() {
    let mut rng = XorShift(0x005E_ED0F_C0DE);
    for _ in 0..20_000 {
        let len = rng.next() as usize % 48;
        let mut bytes = rng.bytes(len);
        if let Some(tag) = bytes.first_mut() {
            *tag %= 8; // mostly known kinds
        }
        cmdlist_models::capture_reader::decode_command(&bytes);
    }
}
