//! Where a device's capture goes: the device's own stream, the contexts' frames handed over,
//! and the file (or any `Write`) they are written to.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::codec::Encoder;
use super::frame::write_header;
use super::record::{
    checkpoint, encode_record, Call, Kind, Outcome, Record, DEVICE_STREAM, FIRST_DEFERRED_STREAM,
};
use super::stream::{seal, StreamBuffer};
use crate::primitive::{AtomicU32, AtomicU64, Ordering};
use std::sync::atomic::AtomicBool;

/// A device's capture: made with [`CaptureSink::new`] (any `Write`) or
/// [`CaptureSink::create`] (a file), given to the device with
/// [`DeviceConfig::with_capture`](crate::DeviceConfig::with_capture). From then on every
/// public call on the device and its contexts is recorded (`docs/CAPTURE.md`).
///
/// Each context appends its records into memory its thread owns; a deferred context hands
/// its frames over at each Finish, and the immediate context writes everything handed over,
/// the device's records and its own to the output at each Flush (and
/// [`CaptureSink::flush`]), so that a capture cut by a crash replays to its last whole
/// Flush. The lock here is taken by the device's free-threaded calls (creates, destroys,
/// a list's drop), by Finish and by Flush, never by a recorded call of a context.
///
/// An output that fails is not the application's error: the calls go on, nothing more is
/// written, and [`CaptureSink::error`] says what happened.
pub struct CaptureSink {
    state: Mutex<SinkState>,
    /// Device records appended so far (the next one's index): every context record notes
    /// it when its call ends. Written under `state`'s lock; read without it.
    device_records: AtomicU64,
    /// The next deferred context's stream.
    next_stream: AtomicU32,
    /// Whether each present is followed by its surface's checksum.
    check_presents: AtomicBool,
}

struct SinkState {
    out: Box<dyn Write + Send>,
    /// The device's stream.
    device: StreamBuffer,
    /// Recordings the deferred contexts handed over (their frames, unsealed), waiting for
    /// the next write, in the order handed over.
    handed: Vec<Vec<u8>>,
    /// Emptied buffers, given back to the contexts that hand theirs over.
    spare: Vec<Vec<u8>>,
    /// A device record's payload, encoded here before it is framed.
    payload: Vec<u8>,
    /// The first write error, after which nothing more is written.
    failed: Option<io::ErrorKind>,
}

impl std::fmt::Debug for CaptureSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureSink")
            .field(
                "device_records",
                &self.device_records.load(Ordering::Relaxed),
            )
            .finish_non_exhaustive()
    }
}

impl CaptureSink {
    /// A capture written to `out`: its header is written at once.
    pub fn new(out: impl Write + Send + 'static) -> io::Result<Arc<Self>> {
        let mut out: Box<dyn Write + Send> = Box::new(out);
        write_header(&mut out)?;
        out.flush()?;
        Ok(Arc::new(CaptureSink {
            state: Mutex::new(SinkState {
                out,
                device: StreamBuffer::new(DEVICE_STREAM),
                handed: Vec::new(),
                spare: Vec::new(),
                payload: Vec::new(),
                failed: None,
            }),
            device_records: AtomicU64::new(0),
            next_stream: AtomicU32::new(FIRST_DEFERRED_STREAM),
            check_presents: AtomicBool::new(false),
        }))
    }

    /// A capture written to a new file at `path` (an existing one is truncated).
    pub fn create(path: impl AsRef<Path>) -> io::Result<Arc<Self>> {
        Self::new(File::create(path)?)
    }

    /// From now on, each present is followed by a record of its surface's bytes (a CRC-32,
    /// [`Call::Checksum`]), which a replay compares with its own. Reading them waits for the
    /// GPU to finish the present, which changes when later calls find it done: a replay
    /// makes the same waits (with `Timing::Exact`), an uncaptured run does not.
    pub fn check_presents(&self, on: bool) {
        self.check_presents.store(on, Ordering::Relaxed);
    }

    /// Whether presents are checked ([`CaptureSink::check_presents`]).
    pub(crate) fn checks_presents(&self) -> bool {
        self.check_presents.load(Ordering::Relaxed)
    }

    /// The first error the output answered, if any: nothing was written after it.
    pub fn error(&self) -> Option<io::ErrorKind> {
        self.lock().failed
    }

    /// Writes everything recorded and handed over so far (the device's records and the
    /// finished lists' recordings; the immediate context's are written at its flushes).
    pub fn flush(&self) {
        self.lock().write(None);
    }

    fn lock(&self) -> MutexGuard<'_, SinkState> {
        // A panic while the lock was held (an output's `write` that panicked) leaves frames
        // whole: each is appended by one `extend_from_slice`.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Device records appended so far.
    pub(crate) fn device_records(&self) -> u64 {
        // Acquire: a record that notes this count comes after those records' effects (an
        // object made is used after its create's record).
        self.device_records.load(Ordering::Acquire)
    }

    /// A new deferred context's stream.
    pub(crate) fn new_stream(&self) -> u32 {
        self.next_stream.fetch_add(1, Ordering::Relaxed)
    }

    /// A record too big for a frame ([`super::MAX_PAYLOAD`]) could not be kept: the capture
    /// ends here (nothing more is written), as after an output error.
    pub(crate) fn lost(&self) {
        let mut state = self.lock();
        state.failed.get_or_insert(io::ErrorKind::InvalidData);
    }

    /// Appends a device record of `kind` whose payload `encode` writes (given the record's
    /// index), counted before the lock is released.
    pub(crate) fn device_record(&self, kind: Kind, encode: impl FnOnce(&mut Encoder<'_>)) {
        let mut state = self.lock();
        let state = &mut *state;
        state.payload.clear();
        encode(&mut Encoder::new(&mut state.payload));
        if !state.device.push(kind as u16, &state.payload) {
            state.failed.get_or_insert(io::ErrorKind::InvalidData);
        }
        self.device_records.fetch_add(1, Ordering::Release);
    }

    /// Appends a device record of `call`, which answered `outcome`.
    pub(crate) fn device_call(&self, call: Call<'_, ()>, outcome: Outcome) {
        let kind = call.kind();
        let record = Record {
            seq: 0,
            outcome,
            call,
        };
        self.device_record(kind, |enc| encode_record(&record, enc, |_, _| {}));
    }

    /// A deferred context's frames, handed over at its Finish: written at the next flush.
    /// Its buffer is swapped with an emptied one (no copy under the lock).
    pub(crate) fn hand_over(&self, frames: &mut StreamBuffer) {
        let mut state = self.lock();
        let spare = state.spare.pop().unwrap_or_default();
        let full = frames.swap_out(spare);
        state.handed.push(full);
    }

    /// Writes the device's records, the frames handed over and the immediate context's
    /// `frames`, then flushes the output.
    pub(crate) fn write_out(&self, frames: &mut StreamBuffer) {
        self.lock().write(Some(frames));
    }
}

/// Emptied recording buffers a sink keeps for the contexts' next hand-overs.
const MAX_SPARES: usize = 64;

impl SinkState {
    fn write(&mut self, frames: Option<&mut StreamBuffer>) {
        if self.failed.is_some() {
            self.device.drain_to(&mut io::sink()).ok();
            self.spare.append(&mut self.handed);
            if let Some(frames) = frames {
                frames.drain_to(&mut io::sink()).ok();
            }
            return;
        }
        let written = (|| {
            self.device.drain_to(&mut self.out)?;
            for recording in &mut self.handed {
                seal(recording);
                self.out.write_all(recording)?;
            }
            // Kept as spares for the next hand-overs, a bounded number.
            self.spare.append(&mut self.handed);
            self.spare.truncate(MAX_SPARES);
            if let Some(frames) = frames {
                frames.drain_to(&mut self.out)?;
            }
            self.out.write_all(&checkpoint())?;
            self.out.flush()
        })();
        if let Err(e) = written {
            self.failed = Some(e.kind());
        }
    }
}
