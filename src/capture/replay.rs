//! Replaying a capture through a device: every recorded call made again, on a context of
//! the replaying device standing for the one that made it, in an order that keeps every
//! order the protocol defines, each answering what it answered when captured.
//!
//! # Order
//! The device's records go in their order. Before device record `i`, every context
//! record whose call had ended before it was appended (its `seq` at most `i`) is replayed:
//! each stream in its order, the deferred contexts' first, then the immediate context's, and
//! a list's Finish before any execute of it. So an object is made before a call uses it, a
//! destroy comes after the calls that used the object before it, and a list is finished
//! before it is executed or dropped, whatever threads the calls came from.
//!
//! All on the calling thread: a replay reproduces what was recorded, not the threads'
//! timing.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::Scope;

use super::answer::Answer;
use super::codec::{CaptureCommand, DecodeError, Decoder};
use super::error::{CaptureError, CaptureErrorKind};
use super::reader::{Frame, FrameReader};
use super::record::{
    decode_record, Call, Kind, ListId, Outcome, Record, CHECKPOINT_STREAM, DEVICE_STREAM,
    IMMEDIATE_STREAM,
};
use super::replay_host::{ContextHost, Done};
use crate::context::command_list::CommandList;
use crate::context::device::Device;
use crate::context::immediate::ImmediateContext;
use crate::driver::Driver;
use crate::error::Result;
use crate::handle::{AnyHandle, Handle, Resource};
use crate::kernel::Kernel;
use crate::map_type::{MapFlags, MapType};

/// Why a replay stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayError {
    /// The record it stopped at (its index among the capture's frames).
    pub record: u64,
    /// The stream of that record.
    pub stream: u32,
    /// What was wrong.
    pub kind: ReplayErrorKind,
}

/// What stopped a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayErrorKind {
    /// The capture's bytes are not a capture (its header).
    NotACapture(CaptureError),
    /// The record is not one a capture writes.
    Decode(DecodeError),
    /// The call succeeded, as it did when captured, with another answer ([`Call::Answer`]).
    Answered {
        /// The call's kind.
        call: Kind,
        /// What it answered when captured, as the capture keeps it.
        captured: u64,
        /// What it answered now.
        replayed: u64,
    },
    /// The call answered otherwise than when it was captured.
    Diverged {
        /// The call's kind.
        call: Kind,
        /// What it answered when captured.
        captured: Outcome,
        /// What it answered now.
        replayed: Outcome,
    },
    /// The record names a context the capture never made.
    UnknownContext,
    /// The record executes or drops a list the capture never finished (or dropped it).
    UnknownList,
    /// The bytes written through a Map are not of the resource the Map handed out, or not
    /// of its length.
    MapBytes,
    /// The thread a deferred context ran on is gone: a driver hook panicked there.
    ContextPanicked,
    /// A presented surface's bytes differ from the capture's: the first present where the
    /// replay's picture is not the captured one.
    Checksum {
        /// The CRC-32 the capture recorded.
        captured: u32,
        /// The replay's.
        replayed: u32,
    },
}

impl core::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "record {} (stream {}): ", self.record, self.stream)?;
        match self.kind {
            ReplayErrorKind::NotACapture(e) => write!(f, "{e}"),
            ReplayErrorKind::Decode(e) => write!(f, "{e}"),
            ReplayErrorKind::Diverged {
                call,
                captured,
                replayed,
            } => write!(
                f,
                "{call:?} answered {replayed:?} where the capture says {captured:?}"
            ),
            ReplayErrorKind::Answered {
                call,
                captured,
                replayed,
            } => write!(
                f,
                "{call:?} answered {replayed:#x} where the capture says {captured:#x}"
            ),
            ReplayErrorKind::UnknownContext => f.write_str("a context the capture never made"),
            ReplayErrorKind::UnknownList => f.write_str("a list the capture never finished"),
            ReplayErrorKind::MapBytes => f.write_str("bytes that do not fit the Map before them"),
            ReplayErrorKind::ContextPanicked => {
                f.write_str("the deferred context's thread panicked")
            }
            ReplayErrorKind::Checksum { captured, replayed } => write!(
                f,
                "the presented surface's bytes differ from the capture's (CRC-32 {replayed:08x}, \
                 captured {captured:08x})"
            ),
        }
    }
}

impl std::error::Error for ReplayError {}

/// What a replay did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayReport {
    /// Records replayed.
    pub records: u64,
    /// Where the capture was cut or damaged, if it was: the records up to the last
    /// checkpoint before it were replayed. A damaged record (its checksum, its length, its
    /// reserved bits) is named as such, at its record; a cut one as
    /// [`CaptureErrorKind::Unfinished`], at the first record of the write the cut ended.
    pub tail: Option<CaptureError>,
    /// The replaying device's object for each object the capture made (by the handle the
    /// capturing device had given it).
    pub objects: HashMap<u64, AnyHandle>,
    /// Presented surfaces whose bytes were found the same as the capture's
    /// ([`CaptureSink::check_presents`](crate::capture::CaptureSink::check_presents)).
    pub presents_checked: u64,
}

impl ReplayReport {
    /// The replaying device's object for `captured`, an object of the capturing device.
    pub fn object<T: crate::handle::ObjectKind>(&self, captured: Handle<T>) -> Option<Handle<T>> {
        let h = self.objects.get(&captured.to_bits())?;
        Handle::from_bits(h.to_bits())
    }
}

/// One context stream's frames, and how far the replay is.
struct Stream<'a> {
    frames: Vec<Frame<'a>>,
    next: usize,
    /// Lists finished so far (a deferred context's).
    finished: u64,
    /// The record at `next` is a [`Call::MapUnmap`] whose Map is replayed already.
    unmap_due: bool,
    /// For each Map record (its index in `frames`) whose bytes a later record holds, that
    /// record's index ([`written_records`]).
    written: HashMap<usize, usize>,
}

/// For each successful Map record of a stream's `frames` (its index) that handed out bytes
/// to write, the index of the [`Call::Written`] that holds them: the first later one of the
/// same resource (recorded at its Unmap, or before a call that may end the Map). One pass,
/// reading the resource's bits and the outcome's byte without decoding the records.
fn written_records(frames: &[Frame<'_>]) -> HashMap<usize, usize> {
    // A context record: `seq` (8 bytes), the outcome's code (1), the resource (8); a Map's
    // type's code follows (1: READ, whose bytes are not recorded).
    let resource = |f: &Frame<'_>| {
        let bits = f.payload.get(9..17)?;
        Some(u64::from_le_bytes(bits.try_into().expect("8 bytes")))
    };
    let mut open: HashMap<u64, usize> = HashMap::new();
    let mut written = HashMap::new();
    for (index, frame) in frames.iter().enumerate() {
        let Some(r) = resource(frame) else {
            continue;
        };
        if frame.kind == Kind::Map as u16 {
            let mapped = frame.payload.get(8) == Some(&0) && frame.payload.get(17) != Some(&1);
            if mapped {
                open.insert(r, index);
            }
        } else if frame.kind == Kind::Written as u16 {
            if let Some(map) = open.remove(&r) {
                written.insert(map, index);
            }
        }
    }
    written
}

/// How a replay treats the calls whose answer depends on how far the GPU has got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Timing {
    /// As captured: every call answers exactly as it did. Right for a replay through a
    /// driver whose GPU progresses as the capturing one's did (the soft driver, set up the
    /// same way).
    #[default]
    Exact,
    /// Whatever the replaying GPU's pace: a staging Map with DO_NOT_WAIT that answered
    /// WAS_STILL_DRAWING is not made again (it changed nothing the application could see),
    /// and one that mapped waits as a Map without the flag does. Right for a replay through
    /// another driver (a capture of the soft driver replayed on Vulkan).
    Any,
}

/// Which threads a replay's deferred contexts run on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayThreads {
    /// All on the replaying thread.
    #[default]
    One,
    /// Each deferred context on a thread of its own, as each ran on its own thread when
    /// captured: its calls, and the driver's hooks they make, run there. One call at a time,
    /// in the replay's order (a capture does not keep the threads' timing).
    PerContext,
}

/// How a replay runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplayOptions {
    /// The calls that poll the GPU.
    pub timing: Timing,
    /// The deferred contexts' threads.
    pub threads: ReplayThreads,
}

impl ReplayOptions {
    /// With [`ReplayOptions::timing`] set.
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    /// With [`ReplayOptions::threads`] set.
    pub fn with_threads(mut self, threads: ReplayThreads) -> Self {
        self.threads = threads;
        self
    }
}

/// Replays the capture `bytes` through `device` and its immediate context `ic`, which should
/// be new (the capture's objects are made again on it), with the default options
/// ([`Timing::Exact`], every context on the calling thread): see [`replay_with`].
pub fn replay<D, K>(
    bytes: &[u8],
    device: &Device<D, K>,
    ic: &mut ImmediateContext<D, K>,
) -> core::result::Result<ReplayReport, ReplayError>
where
    D: Driver,
    D::Command: CaptureCommand,
    K: Kernel,
{
    replay_with(bytes, device, ic, ReplayOptions::default())
}

/// Replays the capture `bytes` through `device` and its immediate context `ic` (new: the
/// capture's objects are made again on it) as `options` say: the calls that poll the GPU
/// ([`Timing`]), the deferred contexts' threads ([`ReplayThreads`]). Stops at the first call
/// that answers otherwise than it did when captured, or at a record that is not one.
pub fn replay_with<D, K>(
    bytes: &[u8],
    device: &Device<D, K>,
    ic: &mut ImmediateContext<D, K>,
    options: ReplayOptions,
) -> core::result::Result<ReplayReport, ReplayError>
where
    D: Driver,
    D::Command: CaptureCommand,
    K: Kernel,
{
    let reader = FrameReader::new(bytes).map_err(|e| ReplayError {
        record: 0,
        stream: DEVICE_STREAM,
        kind: ReplayErrorKind::NotACapture(e),
    })?;
    // Only what the last complete write ends: a crash may cut a write between its device
    // records and the recordings they name.
    let mut frames = Vec::new();
    let (mut whole, mut tail) = (0, None);
    for frame in reader {
        match frame {
            Ok(f) if f.stream == CHECKPOINT_STREAM => whole = frames.len(),
            Ok(f) => frames.push(f),
            Err(e) => tail = Some(e),
        }
    }
    // A cut (a crash's) leaves an unfinished write: the records after the last checkpoint
    // are named as that. Damage is named as itself, at its record, wherever it is.
    let damaged = tail.is_some_and(|e| e.kind != CaptureErrorKind::TornTail);
    if let (Some(first), false) = (frames.get(whole), damaged) {
        tail = Some(CaptureError {
            record: first.record,
            offset: first.offset,
            kind: CaptureErrorKind::Unfinished,
        });
    }
    frames.truncate(whole);
    let mut device_frames = Vec::new();
    let mut streams: HashMap<u32, Stream<'_>> = HashMap::new();
    for f in frames {
        match f.stream {
            DEVICE_STREAM => device_frames.push(f),
            stream => streams
                .entry(stream)
                .or_insert_with(|| Stream {
                    frames: Vec::new(),
                    next: 0,
                    finished: 0,
                    unmap_due: false,
                    written: HashMap::new(),
                })
                .frames
                .push(f),
        }
    }
    for stream in streams.values_mut() {
        stream.written = written_records(&stream.frames);
    }
    std::thread::scope(|scope| {
        let mut replayer = Replayer {
            device,
            ic,
            dcs: HashMap::new(),
            lists: HashMap::new(),
            handles: HashMap::new(),
            streams,
            advancing: Vec::new(),
            timing: options.timing,
            threads: options.threads,
            scope,
            records: 0,
            presents_checked: 0,
            answered: None,
        };
        for (index, frame) in device_frames.iter().enumerate() {
            replayer.advance_all(index as u64)?;
            replayer.device_record(index as u64, frame)?;
        }
        replayer.advance_all(u64::MAX)?;
        // The contexts' threads end here, before the scope does.
        replayer.dcs.clear();
        Ok(ReplayReport {
            records: replayer.records,
            tail,
            objects: core::mem::take(&mut replayer.handles),
            presents_checked: replayer.presents_checked,
        })
    })
}

struct Replayer<'r, 'a, 's, 'env, D: Driver, K: Kernel> {
    device: &'r Device<D, K>,
    ic: &'r mut ImmediateContext<D, K>,
    dcs: HashMap<u32, ContextHost<'s, D, K>>,
    /// Lists finished and not dropped yet: shared with a context's thread while it executes
    /// one.
    lists: HashMap<ListId, Arc<CommandList<D, K>>>,
    /// The replaying device's object for each of the capture's ids.
    handles: HashMap<u64, AnyHandle>,
    streams: HashMap<u32, Stream<'a>>,
    /// The streams being replayed, outermost first: one more each time an execute needs a
    /// list another stream finishes.
    advancing: Vec<u32>,
    timing: Timing,
    threads: ReplayThreads,
    scope: &'s Scope<'s, 'env>,
    records: u64,
    presents_checked: u64,
    /// What the immediate context's last call that answers a value answered, for the
    /// [`Call::Answer`] after it.
    answered: Option<(Kind, u64)>,
}

/// How many streams deep a replay goes to finish the lists executes name: a capture asks
/// at most one per level of nested lists.
const MAX_NESTING: usize = 64;

/// A [`Call::MapUnmap`]'s Unmap's `seq`: the payload's last 9 bytes but one.
fn unmap_seq_of(frame: &Frame<'_>) -> u64 {
    let p = frame.payload;
    match p.len().checked_sub(9).and_then(|at| p.get(at..at + 8)) {
        Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        None => 0,
    }
}

/// A Map's answer, with `data` (what the application wrote through the captured Map, where
/// it was recorded) copied into the bytes the Map handed out.
fn filled<D: Driver, K: Kernel>(mapped: Result<&mut [u8]>, data: Option<&[u8]>) -> Done<D, K> {
    let mut done = Done::of(&mapped);
    if let (Ok(bytes), Some(data)) = (mapped, data) {
        match bytes.len() == data.len() {
            true => bytes.copy_from_slice(data),
            false => done.error = Some(ReplayErrorKind::MapBytes),
        }
    }
    done
}

/// Whether a record's outcome (at byte `at` of its payload) was an error: a call that
/// failed, which a replay need not make again when it cannot (its objects unknown).
fn refused(payload: &[u8], at: usize) -> bool {
    payload.get(at).is_some_and(|&code| code != 0)
}

/// A call's outcome, its answer kept in `answered` for the [`Call::Answer`] after it.
fn answering<T: Answer>(
    answered: &mut Option<(Kind, u64)>,
    call: Kind,
    result: Result<T>,
) -> Outcome {
    *answered = result.as_ref().ok().map(|value| (call, value.answer()));
    (&result).into()
}

/// A record's `seq` (a context stream's), without decoding the rest.
fn seq_of(frame: &Frame<'_>) -> u64 {
    match frame.payload.get(..8) {
        Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        // Too short to be a record: replayed (and refused) as soon as it is reached.
        None => 0,
    }
}

impl<'a, 's, D, K> Replayer<'_, 'a, 's, '_, D, K>
where
    D: Driver,
    D::Command: CaptureCommand,
    K: Kernel,
    'a: 's,
{
    /// Replays every context record whose call ended before device record `bound` was
    /// appended: the deferred contexts' streams first, in their order, then the immediate
    /// context's.
    fn advance_all(&mut self, bound: u64) -> core::result::Result<(), ReplayError> {
        let mut deferred: Vec<u32> = self
            .streams
            .keys()
            .copied()
            .filter(|&s| s != IMMEDIATE_STREAM)
            .collect();
        deferred.sort_unstable();
        for stream in deferred {
            self.advance(stream, bound, None)?;
        }
        self.advance(IMMEDIATE_STREAM, bound, None)
    }

    /// Replays `stream`'s records up to `bound` (see [`Replayer::advance_all`]), or, with
    /// `until_finish`, until its list of that number is finished.
    fn advance(
        &mut self,
        stream: u32,
        bound: u64,
        until_finish: Option<u64>,
    ) -> core::result::Result<(), ReplayError> {
        self.advancing.push(stream);
        let result = self.advance_stream(stream, bound, until_finish);
        self.advancing.pop();
        result
    }

    fn advance_stream(
        &mut self,
        stream: u32,
        bound: u64,
        until_finish: Option<u64>,
    ) -> core::result::Result<(), ReplayError> {
        loop {
            let Some(s) = self.streams.get(&stream) else {
                return Ok(());
            };
            if let Some(n) = until_finish {
                if s.finished > n {
                    return Ok(());
                }
            }
            let Some(&frame) = s.frames.get(s.next) else {
                return Ok(());
            };
            // A Map and its Unmap in one record replay in two halves, each at its turn.
            let (half, due) = match s.unmap_due {
                true => (true, unmap_seq_of(&frame)),
                false => (false, seq_of(&frame)),
            };
            if until_finish.is_none() && due > bound {
                return Ok(());
            }
            // The record that holds what was written through a Map, if this is one.
            let written = s.written.get(&s.next).map(|&at| s.frames[at]);
            let consumed = match frame.kind == Kind::MapUnmap as u16 {
                true => self.map_unmap(&frame, half)?,
                false => self.context_record(&frame, written)?,
            };
            let s = self.streams.get_mut(&stream).expect("the stream is there");
            s.unmap_due = consumed == 0;
            s.next += consumed;
        }
    }

    fn error(frame: &Frame<'_>, kind: ReplayErrorKind) -> ReplayError {
        ReplayError {
            record: frame.record,
            stream: frame.stream,
            kind,
        }
    }

    fn decode<'f>(
        handles: &HashMap<u64, AnyHandle>,
        frame: &Frame<'f>,
        index: u64,
    ) -> core::result::Result<Record<'f, D::Command>, ReplayError> {
        let mut map = |bits: u64| handles.get(&bits).copied();
        let mut dec = Decoder::new(frame.payload, &mut map);
        decode_record::<D::Command>(frame.kind, index, &mut dec)
            .map_err(|e| Self::error(frame, ReplayErrorKind::Decode(e)))
    }

    fn check(
        frame: &Frame<'_>,
        call: Kind,
        captured: Outcome,
        replayed: Outcome,
    ) -> core::result::Result<(), ReplayError> {
        match captured == replayed {
            true => Ok(()),
            false => Err(Self::error(
                frame,
                ReplayErrorKind::Diverged {
                    call,
                    captured,
                    replayed,
                },
            )),
        }
    }

    fn device_record(
        &mut self,
        index: u64,
        frame: &Frame<'_>,
    ) -> core::result::Result<(), ReplayError> {
        let record = match Self::decode(&self.handles, frame, index) {
            Ok(record) => record,
            // As for a context's record: a refused call naming an object the capture never
            // made is passed over.
            Err(_) if refused(frame.payload, 0) => {
                self.records += 1;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        self.records += 1;
        let kind = record.call.kind();
        let replayed: Outcome = match record.call {
            Call::Create { desc, made } => {
                let result = self.device.create(&desc);
                if let Ok(h) = result {
                    self.handles.insert(made, h);
                }
                (&result).into()
            }
            Call::Destroy(h) => (&self.device.destroy(h)).into(),
            Call::CreateDeferred(stream) => {
                let result = self.device.create_deferred_context();
                let outcome = (&result).into();
                if let Ok(dc) = result {
                    let host = ContextHost::new(dc, self.threads, self.scope);
                    self.dcs.insert(stream, host);
                }
                outcome
            }
            Call::DropList(id) => {
                // Dropped in the capture once it was finished: a list this replay has not is
                // one it never finished.
                match self.lists.remove(&id) {
                    Some(list) => drop(list),
                    None => return Err(Self::error(frame, ReplayErrorKind::UnknownList)),
                }
                Outcome::Ok
            }
            Call::CreatePrimary { desc, made } => {
                let result = self.ic.create_primary(desc);
                if let Ok(h) = result {
                    self.handles.insert(made, h.any());
                }
                (&result).into()
            }
            Call::DestroyPrimary(h) => (&self.ic.destroy_primary(h)).into(),
            _ => return Err(Self::error(frame, ReplayErrorKind::UnknownContext)),
        };
        Self::check(frame, kind, record.outcome, replayed)
    }

    /// Replays one context record (a Map with the bytes written through it, which `written`
    /// holds, if it does); answers how many records it consumed.
    fn context_record(
        &mut self,
        frame: &Frame<'a>,
        written: Option<Frame<'a>>,
    ) -> core::result::Result<usize, ReplayError> {
        let record = match Self::decode(&self.handles, frame, 0) {
            Ok(record) => record,
            // A refused call naming an object the capture never made (a forged handle, or
            // another device's): refused again is all it did, so it is passed over.
            Err(e) if refused(frame.payload, 8) => {
                let _ = e;
                self.records += 1;
                return Ok(1);
            }
            Err(e) => return Err(e),
        };
        self.records += 1;
        let kind = record.call.kind();
        if let Call::Execute { list, .. } = record.call {
            match self.ensure_list(frame, list) {
                Ok(()) => {}
                // An execute the application was refused, of a list of no capture's.
                Err(_) if record.outcome != Outcome::Ok && list.stream == DEVICE_STREAM => {
                    return Ok(1);
                }
                Err(e) => return Err(e),
            }
        }
        let stream = frame.stream;
        let consumed = 1;
        let replayed: Outcome = if stream == IMMEDIATE_STREAM {
            match record.call {
                Call::Map {
                    resource,
                    ty,
                    flags,
                } => {
                    let Some(flags) = self.poll_flags(flags, record.outcome) else {
                        // A poll that found the GPU still drawing, not made again.
                        return Ok(consumed);
                    };
                    let data = self.written_by(written)?;
                    let done = filled(self.ic.map(resource, ty, flags), data);
                    self.settle(frame, done)?
                }
                call => self.immediate_call(frame, call, record.outcome)?,
            }
        } else {
            if !self.dcs.contains_key(&stream) {
                return Err(Self::error(frame, ReplayErrorKind::UnknownContext));
            }
            match record.call {
                Call::Map { resource, ty, .. } => {
                    let data = self.written_by(written)?;
                    let host = self.dcs.get_mut(&stream).expect("checked above");
                    let done = host.run(move |dc| filled(dc.map(resource, ty), data));
                    self.settle(frame, done)?
                }
                call => self.deferred_call(frame, call)?,
            }
        };
        Self::check(frame, kind, record.outcome, replayed)?;
        Ok(consumed)
    }

    /// A [`Call::MapUnmap`]: its Map and the bytes written through it (`half` false;
    /// answers 0, the record not consumed yet), or its Unmap (answers 1).
    fn map_unmap(
        &mut self,
        frame: &Frame<'a>,
        half: bool,
    ) -> core::result::Result<usize, ReplayError> {
        let record = Self::decode(&self.handles, frame, 0)?;
        let Call::MapUnmap {
            resource,
            ty,
            flags,
            written,
            unmap_outcome,
            ..
        } = record.call
        else {
            return Err(Self::error(frame, ReplayErrorKind::UnknownContext));
        };
        let stream = frame.stream;
        if half {
            let replayed: Outcome = match stream {
                IMMEDIATE_STREAM => (&self.ic.unmap(resource)).into(),
                _ => match self.dcs.get_mut(&stream) {
                    Some(host) => {
                        let done = host.run(move |dc| Done::of(&dc.unmap(resource)));
                        self.settle(frame, done)?
                    }
                    None => return Err(Self::error(frame, ReplayErrorKind::UnknownContext)),
                },
            };
            Self::check(frame, Kind::Unmap, unmap_outcome, replayed)?;
            return Ok(1);
        }
        self.records += 1;
        let flags = self.poll_flags(flags, record.outcome).unwrap_or(flags);
        // The Map, and the bytes written through it copied into what it handed out.
        let data = (ty != MapType::Read).then_some(written);
        let done = match stream {
            IMMEDIATE_STREAM => filled(self.ic.map(resource, ty, flags), data),
            _ => match self.dcs.get_mut(&stream) {
                Some(host) => host.run(move |dc| filled(dc.map(resource, ty), data)),
                None => return Err(Self::error(frame, ReplayErrorKind::UnknownContext)),
            },
        };
        let replayed = self.settle(frame, done)?;
        Self::check(frame, Kind::Map, record.outcome, replayed)?;
        Ok(0)
    }

    /// The bytes written through a Map, which `written` holds (a [`Call::Written`] of the
    /// same resource, paired by [`written_records`] on the resource's captured bits, which
    /// name one object for the capture's life), copied in at the Map: nothing reads a mapped
    /// resource's memory before its Unmap.
    fn written_by(
        &self,
        written: Option<Frame<'a>>,
    ) -> core::result::Result<Option<&'a [u8]>, ReplayError> {
        let Some(frame) = written else {
            return Ok(None);
        };
        let record = Self::decode(&self.handles, &frame, 0)?;
        match record.call {
            Call::Written { bytes, .. } => Ok(Some(bytes)),
            _ => Err(Self::error(&frame, ReplayErrorKind::MapBytes)),
        }
    }

    /// What a deferred context's call answered, or what was wrong with its record.
    fn settle(
        &mut self,
        frame: &Frame<'_>,
        done: Done<D, K>,
    ) -> core::result::Result<Outcome, ReplayError> {
        match done.error {
            Some(kind) => Err(Self::error(frame, kind)),
            None => Ok(done.outcome),
        }
    }

    /// The flags to replay a Map with, or `None` for a Map not to make again ([`Timing`]).
    fn poll_flags(&self, flags: MapFlags, captured: Outcome) -> Option<MapFlags> {
        if self.timing == Timing::Exact || !flags.contains(MapFlags::DO_NOT_WAIT) {
            return Some(flags);
        }
        match captured {
            Outcome::Err(crate::error::Error::WasStillDrawing) => None,
            _ => Some(flags - MapFlags::DO_NOT_WAIT),
        }
    }

    /// Makes sure `list` is finished: its context's records replayed up to its Finish.
    fn ensure_list(
        &mut self,
        frame: &Frame<'_>,
        list: ListId,
    ) -> core::result::Result<(), ReplayError> {
        if self.lists.contains_key(&list) {
            return Ok(());
        }
        // A list of a stream being replayed already (a capture whose executes go round in a
        // circle), or nested deeper than lists can be, is one the capture never finished
        // first: refused, with no recursion past the bound.
        if self.advancing.contains(&list.stream) || self.advancing.len() >= MAX_NESTING {
            return Err(Self::error(frame, ReplayErrorKind::UnknownList));
        }
        self.advance(list.stream, u64::MAX, Some(list.finish))?;
        match self.lists.contains_key(&list) {
            true => Ok(()),
            false => Err(Self::error(frame, ReplayErrorKind::UnknownList)),
        }
    }

    fn immediate_call(
        &mut self,
        frame: &Frame<'_>,
        call: Call<'_, D::Command>,
        record_outcome: Outcome,
    ) -> core::result::Result<Outcome, ReplayError> {
        let ic = &mut *self.ic;
        Ok(match call {
            Call::Command(c) => (&ic.command(&c)).into(),
            Call::Update {
                resource,
                offset,
                data,
            } => (&ic.update(resource, offset, data)).into(),
            Call::Bind { point, object } => (&ic.bind(point, object)).into(),
            Call::Unmap(r) => (&ic.unmap(r)).into(),
            Call::BeginQuery(q) => (&ic.begin_query(q)).into(),
            Call::EndQuery(q) => (&ic.end_query(q)).into(),
            Call::Execute { list, restoring } => {
                let list = self
                    .lists
                    .get(&list)
                    .ok_or(Self::error(frame, ReplayErrorKind::UnknownList))?;
                let ic = &mut *self.ic;
                match restoring {
                    true => (&ic.execute_command_list_restoring(list)).into(),
                    false => (&ic.execute_command_list(list)).into(),
                }
            }
            Call::Flush => (&ic.flush()).into(),
            Call::EndFrame => (&ic.end_frame()).into(),
            Call::ClearState => (&ic.clear_state()).into(),
            Call::Present(args) => answering(&mut self.answered, Kind::Present, ic.present(&args)),
            Call::Blt(args) => (&ic.blt(&args)).into(),
            Call::Rotate { count, resources } => {
                let rotated: Vec<Handle<Resource>> = resources
                    .iter()
                    .take(usize::from(count))
                    .flatten()
                    .copied()
                    .collect();
                (&ic.rotate_resource_identities(&rotated)).into()
            }
            Call::DestroyDevice => {
                // Where it succeeded, the application had dropped its deferred contexts:
                // so are the replay's. Where it was refused, they lived on.
                if record_outcome == Outcome::Ok {
                    self.dcs.clear();
                }
                (&self.ic.destroy_device()).into()
            }
            Call::GammaCaps => answering(&mut self.answered, Kind::GammaCaps, ic.gamma_caps()),
            Call::SetDisplayMode {
                primary,
                subresource,
            } => {
                let result = ic.set_display_mode(primary, subresource);
                answering(&mut self.answered, Kind::SetDisplayMode, result)
            }
            Call::SetPriority { resource, priority } => {
                (&ic.set_resource_priority(resource, priority)).into()
            }
            Call::QuerySignaled(q) => answering(
                &mut self.answered,
                Kind::QuerySignaled,
                ic.query_signaled(q),
            ),
            Call::ResourceIsBusy(r) => answering(
                &mut self.answered,
                Kind::ResourceIsBusy,
                ic.resource_is_busy(r),
            ),
            Call::Answer(captured) => {
                if let Some((call, replayed)) = self.answered.take() {
                    if replayed != captured && self.compares(call) {
                        let kind = ReplayErrorKind::Answered {
                            call,
                            captured,
                            replayed,
                        };
                        return Err(Self::error(frame, kind));
                    }
                }
                Outcome::Ok
            }
            Call::Trim => {
                ic.trim();
                Outcome::Ok
            }
            Call::Checksum { resource, crc } => {
                // Compared where the replaying GPU keeps the capturing one's pace; the read
                // waits, as the capture's did.
                if self.timing != Timing::Exact {
                    return Ok(record_outcome);
                }
                let result = ic.surface_checksum(resource);
                if let (Ok(replayed), Outcome::Ok) = (result, record_outcome) {
                    if replayed != crc {
                        let kind = ReplayErrorKind::Checksum {
                            captured: crc,
                            replayed,
                        };
                        return Err(Self::error(frame, kind));
                    }
                    self.presents_checked += 1;
                }
                (&result).into()
            }
            // Changes nothing a later call sees; its answer was the application's.
            Call::QueryResidency(_) | Call::Written { .. } => Outcome::Ok,
            _ => return Err(Self::error(frame, ReplayErrorKind::UnknownContext)),
        })
    }

    /// Whether an answer of `call` is compared: every one where the replaying GPU keeps the
    /// capturing one's pace ([`Timing::Exact`]); else not those of the polls of the GPU's
    /// progress, nor the driver's gamma caps (another driver's are its own).
    fn compares(&self, call: Kind) -> bool {
        self.timing == Timing::Exact
            || !matches!(
                call,
                Kind::QuerySignaled | Kind::ResourceIsBusy | Kind::GammaCaps
            )
    }

    fn deferred_call(
        &mut self,
        frame: &Frame<'a>,
        call: Call<'a, D::Command>,
    ) -> core::result::Result<Outcome, ReplayError> {
        let stream = frame.stream;
        let list = match call {
            Call::Execute { list, .. } => Some(
                self.lists
                    .get(&list)
                    .cloned()
                    .ok_or(Self::error(frame, ReplayErrorKind::UnknownList))?,
            ),
            _ => None,
        };
        let host = self.dcs.get_mut(&stream).expect("checked by the caller");
        let done = host.run(move |dc| match call {
            Call::Execute { restoring, .. } => {
                let list = list.expect("looked up above");
                Done::of(&match restoring {
                    true => dc.execute_command_list_restoring(&list),
                    false => dc.execute_command_list(&list),
                })
            }
            Call::Command(c) => Done::of(&dc.command(c)),
            Call::Update {
                resource,
                offset,
                data,
            } => Done::of(&dc.update(resource, offset, data)),
            Call::Bind { point, object } => Done::of(&dc.bind(point, object)),
            Call::Unmap(r) => Done::of(&dc.unmap(r)),
            Call::BeginQuery(q) => Done::of(&dc.begin_query(q)),
            Call::EndQuery(q) => Done::of(&dc.end_query(q)),
            Call::Abandon => Done::of(&dc.abandon()),
            Call::Finish { restoring } => {
                let result = match restoring {
                    true => dc.finish_restoring_state(),
                    false => dc.finish(),
                };
                let mut done = Done::of(&result);
                done.list = result.ok();
                done
            }
            Call::Trim => {
                dc.trim();
                Done::of(&Ok(()))
            }
            Call::Written { .. } => Done::of(&Ok(())),
            _ => Done {
                outcome: Outcome::Ok,
                list: None,
                error: Some(ReplayErrorKind::UnknownContext),
            },
        });
        if let Some(list) = done.list {
            let s = self.streams.get_mut(&stream).expect("a stream replayed");
            let id = ListId {
                stream,
                finish: s.finished,
            };
            s.finished += 1;
            self.lists.insert(id, Arc::new(list));
            return Ok(done.outcome);
        }
        self.settle(frame, done)
    }
}
