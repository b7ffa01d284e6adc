//! A capture file read whole: its frames, where its last checkpoint is, how it ends, and
//! each record decoded for the soft driver.

use std::collections::HashMap;
use std::path::Path;

use cmdlist::capture::{
    decode_record, CaptureError, CaptureErrorKind, Decoder, Frame, FrameReader, Kind, Record,
    CHECKPOINT_STREAM, DEVICE_STREAM,
};
use cmdlist::handle::AnyHandle;
use cmdlist::soft::SoftCommand;

use crate::Failure;

/// A capture's bytes and where they came from.
pub struct Capture {
    /// The path, as the user gave it.
    pub path: String,
    /// The whole file.
    pub bytes: Vec<u8>,
}

impl Capture {
    /// Reads `path` whole.
    pub fn read(path: &Path) -> Result<Capture, Failure> {
        let name = path.display().to_string();
        let bytes =
            std::fs::read(path).map_err(|e| Failure(format!("{name}: cannot read: {e}")))?;
        Ok(Capture { path: name, bytes })
    }

    /// Its frames, or why its header is not a capture's.
    pub fn frames(&self) -> Result<Frames<'_>, Failure> {
        Frames::of(&self.bytes).map_err(|e| Failure(format!("{}: {e}", self.path)))
    }
}

/// A capture's readable frames and how it ends.
pub struct Frames<'a> {
    /// Every whole, checked frame, checkpoints included, in file order (`frames[i].record
    /// == i`).
    pub all: Vec<Frame<'a>>,
    /// Each frame's index in the device stream, for the device's records (their `seq`).
    pub device_index: Vec<u64>,
    /// How many frames the last checkpoint ends (0: none).
    pub whole: usize,
    /// Why the reader stopped before the end of the bytes, if it did.
    pub error: Option<CaptureError>,
}

/// How a capture ends, as a replay sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// At a checkpoint: every record is replayed.
    Checkpoint,
    /// No record at all.
    Empty,
    /// Cut: a crash's (a torn last record, or records written after the last checkpoint);
    /// the error names the first record not replayed.
    Cut(CaptureError),
    /// Damaged (checksum, length or reserved bits): the error names the damaged record.
    Damaged(CaptureError),
}

impl<'a> Frames<'a> {
    /// The frames of `bytes`.
    pub fn of(bytes: &'a [u8]) -> Result<Frames<'a>, CaptureError> {
        let mut all = Vec::new();
        let mut device_index = Vec::new();
        let (mut devices, mut whole, mut error) = (0u64, 0, None);
        for frame in FrameReader::new(bytes)? {
            match frame {
                Ok(f) => {
                    device_index.push(devices);
                    if f.stream == DEVICE_STREAM {
                        devices += 1;
                    }
                    all.push(f);
                    if f.stream == CHECKPOINT_STREAM {
                        whole = all.len();
                    }
                }
                Err(e) => error = Some(e),
            }
        }
        Ok(Frames {
            all,
            device_index,
            whole,
            error,
        })
    }

    /// How the capture ends: damage wherever it is, else a cut (a torn record, or records
    /// after the last checkpoint), else its last checkpoint.
    pub fn end(&self) -> End {
        if let Some(e) = self.error.filter(|e| e.kind != CaptureErrorKind::TornTail) {
            return End::Damaged(e);
        }
        let unfinished = self.all[self.whole..]
            .iter()
            .find(|f| f.stream != CHECKPOINT_STREAM);
        match (unfinished, self.error) {
            (Some(f), _) => End::Cut(CaptureError {
                record: f.record,
                offset: f.offset,
                kind: CaptureErrorKind::Unfinished,
            }),
            (None, Some(e)) => End::Cut(e),
            (None, None) if self.all.is_empty() => End::Empty,
            (None, None) => End::Checkpoint,
        }
    }

    /// The records a replay makes: those before the last checkpoint but checkpoints.
    pub fn replayed(&self) -> impl Iterator<Item = &Frame<'a>> + '_ {
        self.all[..self.whole]
            .iter()
            .filter(|f| f.stream != CHECKPOINT_STREAM)
    }

    /// The records written after the last checkpoint (a replay stops before them).
    pub fn unfinished(&self) -> impl Iterator<Item = &Frame<'a>> + '_ {
        self.all[self.whole..]
            .iter()
            .filter(|f| f.stream != CHECKPOINT_STREAM)
    }

    /// Record `index` decoded, its objects the capture's own handle bits.
    pub fn decode(&self, index: usize) -> Result<Record<'a, SoftCommand>, String> {
        let frame = &self.all[index];
        let mut same = |bits: u64| AnyHandle::from_bits(bits);
        let mut dec = Decoder::new(frame.payload, &mut same);
        decode_record::<SoftCommand>(frame.kind, self.device_index[index], &mut dec)
            .map_err(|e| e.to_string())
    }

    /// What each object the capture made is, by its handle's bits: from its create.
    pub fn objects(&self) -> HashMap<u64, &'static str> {
        let mut objects = HashMap::new();
        for f in self.all.iter() {
            if f.kind != Kind::Create as u16 && f.kind != Kind::CreatePrimary as u16 {
                continue;
            }
            if let Ok(record) = self.decode(f.record as usize) {
                if let Some((bits, what)) = crate::show::made(&record.call) {
                    objects.insert(bits, what);
                }
            }
        }
        objects
    }
}

/// A context record's `seq` (its payload's first 8 bytes), 0 when too short.
pub fn seq_of(frame: &Frame<'_>) -> u64 {
    match frame.payload.get(..8) {
        Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        None => 0,
    }
}

/// A stream's name: `device`, `immediate`, or `dc N` for a deferred context.
pub fn stream_name(stream: u32) -> String {
    match stream {
        DEVICE_STREAM => "device".into(),
        cmdlist::capture::IMMEDIATE_STREAM => "immediate".into(),
        CHECKPOINT_STREAM => "checkpoint".into(),
        s => format!("dc {s}"),
    }
}

/// A record kind's name (`Map`, `MapUnmap`...), or its number when no kind has it.
pub fn kind_name(kind: u16) -> String {
    match Kind::of_code(kind) {
        Some(k) => format!("{k:?}"),
        None => format!("kind {kind}"),
    }
}
