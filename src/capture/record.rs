//! What a capture's records mean: one [`Call`] per public call of the device and its
//! contexts, with its outcome, and how each is written and read back.
//!
//! # Streams and order
//! Stream [`DEVICE_STREAM`] holds the device's free-threaded calls (creates, destroys, a
//! deferred context's creation, a list's drop), appended under the sink's lock in the order
//! they took effect; record `i` of that stream is the device's `i`-th. Every other stream is
//! one context's ([`IMMEDIATE_STREAM`], then one per deferred context), appended by its own
//! thread into memory it owns, each record starting with `seq`: how many device records had
//! been appended when the call ended. A replay keeps every order the protocol defines from
//! that alone: a context's call comes after every device record before its `seq` (an object
//! is used after its create) and before every one from its `seq` on (a destroy after the
//! uses that preceded it), and an execute names the Finish that made its list
//! ([`ListId`]).

use super::codec::{CaptureCommand, DecodeError, Decoder, Encoder};
use crate::desc::{BindFlags, ObjectDesc, QueryKind, ResourceDesc, ResourceFlags, Texture2d};
use crate::desc::{Usage, ViewDesc};
use crate::dxgi::{BltArgs, BltFlags, DxgiContext, PresentArgs, PresentFlags, Rect, Rotation};
use crate::error::{AppError, Error};
use crate::handle::{AnyHandle, Handle, HandleType, Query, Resource};
use crate::map_type::{MapFlags, MapType};

/// The device's stream: creates, destroys, deferred contexts made, lists dropped.
pub const DEVICE_STREAM: u32 = 0;
/// The immediate context's stream.
pub const IMMEDIATE_STREAM: u32 = 1;
/// The stream of the empty frame that ends each write of the capture: everything before it
/// is whole (a list's Finish before the drop that names it, a Map before its bytes). A replay
/// goes up to the last one.
pub const CHECKPOINT_STREAM: u32 = u32::MAX;
/// The first deferred context's stream; each later one takes the next number.
pub const FIRST_DEFERRED_STREAM: u32 = 2;

/// A command list, as a capture names it: the deferred context's stream that finished it,
/// and how many lists that stream had finished before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListId {
    /// The stream of the deferred context that finished it.
    pub stream: u32,
    /// Lists that stream finished before it.
    pub finish: u64,
}

/// What a call answered: success, or the error value it returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The call succeeded.
    Ok,
    /// The call failed with this error.
    Err(Error),
}

impl<T> From<&crate::error::Result<T>> for Outcome {
    fn from(result: &crate::error::Result<T>) -> Self {
        match result {
            Ok(_) => Outcome::Ok,
            Err(e) => Outcome::Err(*e),
        }
    }
}

const APP_ERRORS: [AppError; 17] = [
    AppError::StaleHandle,
    AppError::WrongDevice,
    AppError::WrongType,
    AppError::DoubleDestroy,
    AppError::MissingDependency,
    AppError::PrimaryMismatch,
    AppError::CommandListNotExecutable,
    AppError::MapConflict,
    AppError::QueryConflict,
    AppError::InvalidState,
    AppError::OutOfRange,
    AppError::NotDisplayFormat,
    AppError::BadBindFlags,
    AppError::NotRotatable,
    AppError::DeferredContextsAlive,
    AppError::NotMappable,
    AppError::MapWithoutDiscard,
];

/// The first application error's code; the others follow in [`APP_ERRORS`]' order.
const APP_ERROR_BASE: u8 = 32;

impl Outcome {
    /// The byte a record keeps of it (after a context record's 8-byte `seq`; first in a
    /// device record's payload): 0 for success, 1 to 5 for the engine's errors, 32 on for the
    /// application's, in the order of [`AppError`]'s variants.
    #[inline]
    pub fn code(self) -> u8 {
        match self {
            Outcome::Ok => 0,
            Outcome::Err(Error::OutOfMemory) => 1,
            Outcome::Err(Error::InvalidArg) => 2,
            Outcome::Err(Error::DeviceRemoved) => 3,
            Outcome::Err(Error::Unsupported) => 4,
            Outcome::Err(Error::WasStillDrawing) => 5,
            Outcome::Err(Error::Application(kind)) => {
                let at = APP_ERRORS.iter().position(|&k| k == kind);
                // An application error newer than this format reads back as the nearest
                // meaning the format has: the handle was refused.
                APP_ERROR_BASE + at.unwrap_or(0) as u8
            }
        }
    }

    /// The outcome a record's byte names ([`Outcome::code`]), if it names one.
    pub fn of_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => Outcome::Ok,
            1 => Outcome::Err(Error::OutOfMemory),
            2 => Outcome::Err(Error::InvalidArg),
            3 => Outcome::Err(Error::DeviceRemoved),
            4 => Outcome::Err(Error::Unsupported),
            5 => Outcome::Err(Error::WasStillDrawing),
            c => {
                let kind = APP_ERRORS.get(usize::from(c.checked_sub(APP_ERROR_BASE)?))?;
                Outcome::Err(Error::Application(*kind))
            }
        })
    }
}

/// A record's kind, the frame's `kind` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
#[non_exhaustive]
pub enum Kind {
    /// [`Call::Create`].
    Create = 1,
    /// [`Call::Destroy`].
    Destroy = 2,
    /// [`Call::CreateDeferred`].
    CreateDeferred = 3,
    /// [`Call::DropList`].
    DropList = 4,
    /// [`Call::CreatePrimary`].
    CreatePrimary = 5,
    /// [`Call::DestroyPrimary`].
    DestroyPrimary = 6,
    /// [`Call::Command`].
    Command = 16,
    /// [`Call::Update`].
    Update = 17,
    /// [`Call::Bind`].
    Bind = 18,
    /// [`Call::Map`].
    Map = 19,
    /// [`Call::Written`].
    Written = 20,
    /// [`Call::Unmap`].
    Unmap = 21,
    /// [`Call::BeginQuery`].
    BeginQuery = 22,
    /// [`Call::EndQuery`].
    EndQuery = 23,
    /// [`Call::Finish`].
    Finish = 24,
    /// [`Call::Abandon`].
    Abandon = 25,
    /// [`Call::Execute`].
    Execute = 26,
    /// [`Call::Flush`].
    Flush = 27,
    /// [`Call::EndFrame`].
    EndFrame = 28,
    /// [`Call::ClearState`].
    ClearState = 29,
    /// [`Call::Present`].
    Present = 30,
    /// [`Call::Blt`].
    Blt = 31,
    /// [`Call::Rotate`].
    Rotate = 32,
    /// [`Call::DestroyDevice`].
    DestroyDevice = 33,
    /// [`Call::MapUnmap`].
    MapUnmap = 34,
    /// [`Call::GammaCaps`].
    GammaCaps = 35,
    /// [`Call::SetDisplayMode`].
    SetDisplayMode = 36,
    /// [`Call::SetPriority`].
    SetPriority = 37,
    /// [`Call::QueryResidency`].
    QueryResidency = 38,
    /// [`Call::QuerySignaled`].
    QuerySignaled = 39,
    /// [`Call::ResourceIsBusy`].
    ResourceIsBusy = 40,
    /// [`Call::Trim`].
    Trim = 41,
    /// [`Call::Checksum`].
    Checksum = 42,
    /// [`Call::Answer`].
    Answer = 43,
}

const KINDS: [Kind; 34] = [
    Kind::Create,
    Kind::Destroy,
    Kind::CreateDeferred,
    Kind::DropList,
    Kind::CreatePrimary,
    Kind::DestroyPrimary,
    Kind::Command,
    Kind::Update,
    Kind::Bind,
    Kind::Map,
    Kind::Written,
    Kind::Unmap,
    Kind::BeginQuery,
    Kind::EndQuery,
    Kind::Finish,
    Kind::Abandon,
    Kind::Execute,
    Kind::Flush,
    Kind::EndFrame,
    Kind::ClearState,
    Kind::Present,
    Kind::Blt,
    Kind::Rotate,
    Kind::DestroyDevice,
    Kind::MapUnmap,
    Kind::GammaCaps,
    Kind::SetDisplayMode,
    Kind::SetPriority,
    Kind::QueryResidency,
    Kind::QuerySignaled,
    Kind::ResourceIsBusy,
    Kind::Trim,
    Kind::Checksum,
    Kind::Answer,
];

impl Kind {
    /// The kind with this code, if any.
    pub fn of_code(code: u16) -> Option<Kind> {
        KINDS.iter().copied().find(|&k| k as u16 == code)
    }
}

/// One call, with what it was given. Objects are the capture's ids (a handle's bits at
/// capture) where a record makes them, and the replaying device's handles where a record
/// uses them (the [`Decoder`]'s map). Byte strings are borrowed from the capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Call<'a, C> {
    /// `Device::create` (and `create_resource`, `create_view`, `create_query`): the
    /// description and the capture's id of the object made (0 when it failed).
    Create {
        /// What was created.
        desc: ObjectDesc<'a>,
        /// The capture's id of the object made.
        made: u64,
    },
    /// `Device::destroy`.
    Destroy(AnyHandle),
    /// `Device::create_deferred_context`: the new context's stream (0 when it failed).
    CreateDeferred(u32),
    /// A command list dropped (RecycleDestroyCommandList or DestroyCommandList), on
    /// whatever thread dropped it.
    DropList(ListId),
    /// `ImmediateContext::create_primary`: the description and the id made.
    CreatePrimary {
        /// The primary's description.
        desc: ResourceDesc,
        /// The capture's id of the primary made.
        made: u64,
    },
    /// `ImmediateContext::destroy_primary`.
    DestroyPrimary(Handle<Resource>),
    /// `command` on a context.
    Command(C),
    /// `update` (UpdateSubresource).
    Update {
        /// The resource written.
        resource: Handle<Resource>,
        /// Where.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// `bind`.
    Bind {
        /// The binding point.
        point: crate::bind::BindPoint,
        /// What was bound there, or nothing.
        object: Option<AnyHandle>,
    },
    /// A Map of any kind (`map`, `map_discard`, `map_no_overwrite`, `map_staging`).
    Map {
        /// The resource mapped.
        resource: Handle<Resource>,
        /// The Map's type.
        ty: MapType,
        /// Its flags.
        flags: MapFlags,
    },
    /// What the application wrote through a Map, as it stood at the Map's Unmap (or before
    /// an earlier call that may end the Map or touch its memory): the Map's bytes, whole.
    Written {
        /// The resource mapped.
        resource: Handle<Resource>,
        /// Its bytes.
        bytes: &'a [u8],
    },
    /// `unmap` (but the Unmap that is the call right after its Map: [`Call::MapUnmap`]).
    Unmap(Handle<Resource>),
    /// `begin_query`.
    BeginQuery(Handle<Query>),
    /// `end_query`.
    EndQuery(Handle<Query>),
    /// `finish` (or `finish_restoring_state`: `restoring`), making the stream's next list.
    Finish {
        /// FinishCommandList(RestoreDeferredContextState = TRUE).
        restoring: bool,
    },
    /// `abandon`.
    Abandon,
    /// `execute_command_list` (or `_restoring`).
    Execute {
        /// The list executed.
        list: ListId,
        /// ExecuteCommandList(RestoreContextState = TRUE).
        restoring: bool,
    },
    /// `flush`.
    Flush,
    /// `end_frame`.
    EndFrame,
    /// `clear_state`.
    ClearState,
    /// `present`.
    Present(PresentArgs),
    /// `blt`.
    Blt(BltArgs),
    /// `rotate_resource_identities`: up to [`MAX_ROTATED`] resources.
    Rotate {
        /// How many of `resources` were rotated.
        count: u8,
        /// The resources, the first `count` of them.
        resources: [Option<Handle<Resource>>; MAX_ROTATED],
    },
    /// `destroy_device`.
    DestroyDevice,
    /// A Map that succeeded and its Unmap, the context's next call, in one record (the
    /// common case: a draw's constants): the record's `seq` and outcome are the Map's.
    MapUnmap {
        /// The resource mapped.
        resource: Handle<Resource>,
        /// The Map's type.
        ty: MapType,
        /// Its flags.
        flags: MapFlags,
        /// What the application wrote through the Map (empty for a READ Map).
        written: &'a [u8],
        /// The device records appended when the Unmap ended.
        unmap_seq: u64,
        /// What the Unmap answered.
        unmap_outcome: Outcome,
    },
    /// `gamma_caps`.
    GammaCaps,
    /// `set_display_mode`.
    SetDisplayMode {
        /// The primary.
        primary: Handle<Resource>,
        /// Its subresource.
        subresource: u32,
    },
    /// `set_resource_priority`.
    SetPriority {
        /// The resource.
        resource: Handle<Resource>,
        /// The priority.
        priority: u32,
    },
    /// `query_resource_residency` of this many resources: recorded, not replayed (it
    /// changes nothing a later call sees).
    QueryResidency(u32),
    /// `query_signaled` (it polls the GPU's progress, which later calls see).
    QuerySignaled(Handle<Query>),
    /// `resource_is_busy` (it polls the GPU's progress too).
    ResourceIsBusy(Handle<Resource>),
    /// `trim` on either context.
    Trim,
    /// Not a call: the presented surface's bytes after a present, as a CRC-32, where the
    /// sink checks presents ([`crate::capture::CaptureSink::check_presents`]); the outcome
    /// is that of reading them (the kernel may not lock the surface's memory).
    Checksum {
        /// The surface presented.
        resource: Handle<Resource>,
        /// The CRC-32 of its bytes.
        crc: u32,
    },
    /// What the context's call before it answered besides success, where it answers a
    /// value: `query_signaled`'s and `resource_is_busy`'s bool (1 for true), `present`'s
    /// status (its `HRESULT`'s 32 bits), `set_display_mode`'s outcome (0 for a mode set,
    /// else the private format's attribute with bit 32 set), `gamma_caps`' (a CRC-32 of its
    /// fields). Recorded only where that call succeeded.
    Answer(u64),
}

/// The most resources one recorded rotation names (a swap chain's buffers).
pub const MAX_ROTATED: usize = 16;

impl<C> Call<'_, C> {
    /// The record's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Call::Create { .. } => Kind::Create,
            Call::Destroy(_) => Kind::Destroy,
            Call::CreateDeferred(_) => Kind::CreateDeferred,
            Call::DropList(_) => Kind::DropList,
            Call::CreatePrimary { .. } => Kind::CreatePrimary,
            Call::DestroyPrimary(_) => Kind::DestroyPrimary,
            Call::Command(_) => Kind::Command,
            Call::Update { .. } => Kind::Update,
            Call::Bind { .. } => Kind::Bind,
            Call::Map { .. } => Kind::Map,
            Call::Written { .. } => Kind::Written,
            Call::Unmap(_) => Kind::Unmap,
            Call::BeginQuery(_) => Kind::BeginQuery,
            Call::EndQuery(_) => Kind::EndQuery,
            Call::Finish { .. } => Kind::Finish,
            Call::Abandon => Kind::Abandon,
            Call::Execute { .. } => Kind::Execute,
            Call::Flush => Kind::Flush,
            Call::EndFrame => Kind::EndFrame,
            Call::ClearState => Kind::ClearState,
            Call::Present(_) => Kind::Present,
            Call::Blt(_) => Kind::Blt,
            Call::Rotate { .. } => Kind::Rotate,
            Call::DestroyDevice => Kind::DestroyDevice,
            Call::MapUnmap { .. } => Kind::MapUnmap,
            Call::GammaCaps => Kind::GammaCaps,
            Call::SetDisplayMode { .. } => Kind::SetDisplayMode,
            Call::SetPriority { .. } => Kind::SetPriority,
            Call::QueryResidency(_) => Kind::QueryResidency,
            Call::QuerySignaled(_) => Kind::QuerySignaled,
            Call::ResourceIsBusy(_) => Kind::ResourceIsBusy,
            Call::Trim => Kind::Trim,
            Call::Checksum { .. } => Kind::Checksum,
            Call::Answer(_) => Kind::Answer,
        }
    }

    /// Whether the record belongs to the device's stream.
    pub fn on_device_stream(&self) -> bool {
        matches!(
            self.kind(),
            Kind::Create
                | Kind::Destroy
                | Kind::CreateDeferred
                | Kind::DropList
                | Kind::CreatePrimary
                | Kind::DestroyPrimary
        )
    }
}

/// One record: a call, what it answered, and (on a context's stream) the device records
/// appended before it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a, C> {
    /// On a context's stream: how many device records had been appended when the call
    /// ended. On the device's stream: the record's own index there.
    pub seq: u64,
    /// What the call answered.
    pub outcome: Outcome,
    /// The call.
    pub call: Call<'a, C>,
}

/// Writes `call`'s fields (the payload after the sequence number and outcome), with
/// `command` writing a driver command (a byte saying whether the driver could, then the
/// command: [`encode_command`]). Objects are written by their handles' bits.
#[inline]
pub(crate) fn encode_call<C>(
    call: &Call<'_, C>,
    enc: &mut Encoder<'_>,
    command: impl FnOnce(&C, &mut Encoder<'_>),
) {
    match *call {
        Call::Create { desc, made } => {
            encode_desc(&desc, enc);
            enc.u64(made);
        }
        Call::Destroy(h) => enc.handle(h),
        Call::CreateDeferred(stream) => enc.u32(stream),
        Call::DropList(list) | Call::Execute { list, .. } => {
            enc.u32(list.stream);
            enc.u64(list.finish);
            if let Call::Execute { restoring, .. } = call {
                enc.u8(u8::from(*restoring));
            }
        }
        Call::CreatePrimary { desc, made } => {
            encode_resource(&desc, enc);
            enc.u64(made);
        }
        Call::DestroyPrimary(h) | Call::Unmap(h) => enc.object(h),
        Call::Command(ref c) => command(c, enc),
        Call::Update {
            resource,
            offset,
            data,
        } => {
            enc.object(resource);
            enc.u64(offset);
            enc.bytes(data);
        }
        Call::Bind { point, object } => {
            enc.point(point);
            match object {
                Some(h) => {
                    enc.u8(1);
                    enc.handle(h);
                }
                None => enc.u8(0),
            }
        }
        Call::Map {
            resource,
            ty,
            flags,
        } => {
            enc.object(resource);
            enc.u8(map_type_code(ty));
            enc.u32(flags.bits());
        }
        Call::Written { resource, bytes } => {
            enc.object(resource);
            enc.bytes(bytes);
        }
        Call::BeginQuery(q) | Call::EndQuery(q) => enc.object(q),
        Call::Finish { restoring } => enc.u8(u8::from(restoring)),
        Call::Present(args) => {
            enc.object(args.src);
            enc.u32(args.src_subresource);
            match args.dst {
                Some((h, sub)) => {
                    enc.u8(1);
                    enc.object(h);
                    enc.u32(sub);
                }
                None => enc.u8(0),
            }
            enc.u64(args.dxgi_context.0 as u64);
            enc.u32(args.flags.bits());
            enc.u32(args.flip_interval);
        }
        Call::Blt(args) => {
            enc.object(args.dst);
            enc.u32(args.dst_subresource);
            encode_rect(args.dst_rect, enc);
            enc.object(args.src);
            enc.u32(args.src_subresource);
            match args.src_rect {
                Some(r) => {
                    enc.u8(1);
                    encode_rect(r, enc);
                }
                None => enc.u8(0),
            }
            enc.u32(args.flags.bits());
            enc.u8(args.rotation as u8);
        }
        Call::Rotate { count, resources } => {
            enc.u8(count);
            for h in resources.iter().take(usize::from(count)).flatten() {
                enc.object(*h);
            }
        }
        Call::MapUnmap {
            resource,
            ty,
            flags,
            written,
            unmap_seq,
            unmap_outcome,
        } => {
            enc.object(resource);
            enc.u8(map_type_code(ty));
            enc.u32(flags.bits());
            enc.bytes(written);
            // Last: patched when the Unmap ends.
            enc.u64(unmap_seq);
            enc.u8(unmap_outcome.code());
        }
        Call::SetDisplayMode {
            primary: resource,
            subresource: value,
        }
        | Call::SetPriority {
            resource,
            priority: value,
        } => {
            enc.object(resource);
            enc.u32(value);
        }
        Call::QueryResidency(count) => enc.u32(count),
        Call::Checksum { resource, crc } => {
            enc.object(resource);
            enc.u32(crc);
        }
        Call::QuerySignaled(q) => enc.object(q),
        Call::ResourceIsBusy(r) => enc.object(r),
        Call::Answer(value) => enc.u64(value),
        Call::Abandon
        | Call::Flush
        | Call::EndFrame
        | Call::ClearState
        | Call::DestroyDevice
        | Call::GammaCaps
        | Call::Trim => {}
    }
}

/// The frame that ends each write of the capture, on [`CHECKPOINT_STREAM`] (kind 0, empty).
pub(crate) fn checkpoint() -> [u8; crate::capture::FRAME_HEADER_LEN] {
    let mut frame = super::frame::frame_header(CHECKPOINT_STREAM, 0, 0);
    super::stream::seal(&mut frame);
    frame
}

/// Writes a record's payload: the sequence number (context streams only), the outcome,
/// the call.
#[inline]
pub(crate) fn encode_record<C>(
    record: &Record<'_, C>,
    enc: &mut Encoder<'_>,
    command: impl FnOnce(&C, &mut Encoder<'_>),
) {
    if !record.call.on_device_stream() {
        enc.u64(record.seq);
    }
    enc.u8(record.outcome.code());
    encode_call(&record.call, enc, command);
}

/// Reads a record of `kind` back. Flags keep every bit written, named or not: the call is
/// made again with what the application passed, and the engine answers as it did. `index` is the record's index in the device's stream
/// (its `seq` there); `made` reads an object a record makes (a create's id, never mapped).
/// Whatever the bytes, a record or a [`DecodeError`].
pub fn decode_record<'a, C: CaptureCommand>(
    kind: u16,
    index: u64,
    dec: &mut Decoder<'a, '_>,
) -> Result<Record<'a, C>, DecodeError> {
    let kind = Kind::of_code(kind).ok_or(dec.error("a record kind"))?;
    let device = matches!(
        kind,
        Kind::Create
            | Kind::Destroy
            | Kind::CreateDeferred
            | Kind::DropList
            | Kind::CreatePrimary
            | Kind::DestroyPrimary
    );
    let seq = match device {
        true => index,
        false => dec.u64()?,
    };
    let code = dec.u8()?;
    let outcome = Outcome::of_code(code).ok_or(dec.error("an outcome"))?;
    let call = match kind {
        Kind::Create => {
            let desc = decode_desc(dec)?;
            Call::Create {
                desc,
                made: dec.u64()?,
            }
        }
        Kind::Destroy => Call::Destroy(dec.handle()?),
        Kind::CreateDeferred => Call::CreateDeferred(dec.u32()?),
        Kind::DropList => Call::DropList(decode_list(dec)?),
        Kind::CreatePrimary => Call::CreatePrimary {
            desc: decode_resource(dec)?,
            made: dec.u64()?,
        },
        Kind::DestroyPrimary => Call::DestroyPrimary(dec.object()?),
        Kind::Command => match dec.u8()? {
            1 => Call::Command(C::decode(dec)?),
            0 => return Err(dec.error("a command its driver could capture")),
            _ => return Err(dec.error("whether the command was captured")),
        },
        Kind::Update => Call::Update {
            resource: dec.object()?,
            offset: dec.u64()?,
            data: dec.bytes()?,
        },
        Kind::Bind => {
            let point = dec.point()?;
            let object = match dec.u8()? {
                0 => None,
                1 => Some(dec.handle()?),
                _ => return Err(dec.error("whether an object is bound")),
            };
            Call::Bind { point, object }
        }
        Kind::Map => {
            let resource = dec.object()?;
            let ty = map_type_of(dec.u8()?).ok_or(dec.error("a Map type"))?;
            let flags = MapFlags::from_bits_retain(dec.u32()?);
            Call::Map {
                resource,
                ty,
                flags,
            }
        }
        Kind::Written => Call::Written {
            resource: dec.object()?,
            bytes: dec.bytes()?,
        },
        Kind::Unmap => Call::Unmap(dec.object()?),
        Kind::BeginQuery => Call::BeginQuery(dec.object()?),
        Kind::EndQuery => Call::EndQuery(dec.object()?),
        Kind::Finish => Call::Finish {
            restoring: decode_bool(dec)?,
        },
        Kind::Abandon => Call::Abandon,
        Kind::Execute => Call::Execute {
            list: decode_list(dec)?,
            restoring: decode_bool(dec)?,
        },
        Kind::Flush => Call::Flush,
        Kind::EndFrame => Call::EndFrame,
        Kind::ClearState => Call::ClearState,
        Kind::Present => {
            let src = dec.object()?;
            let src_subresource = dec.u32()?;
            let dst = match dec.u8()? {
                0 => None,
                1 => Some((dec.object()?, dec.u32()?)),
                _ => return Err(dec.error("whether a present has a destination")),
            };
            let context = usize::try_from(dec.u64()?).map_err(|_| dec.error("a DXGI context"))?;
            Call::Present(PresentArgs {
                src,
                src_subresource,
                dst,
                dxgi_context: DxgiContext(context),
                flags: PresentFlags::from_bits_retain(dec.u32()?),
                flip_interval: dec.u32()?,
            })
        }
        Kind::Blt => {
            let dst = dec.object()?;
            let dst_subresource = dec.u32()?;
            let dst_rect = decode_rect(dec)?;
            let src = dec.object()?;
            let src_subresource = dec.u32()?;
            let src_rect = match dec.u8()? {
                0 => None,
                1 => Some(decode_rect(dec)?),
                _ => return Err(dec.error("whether a Blt has a source rectangle")),
            };
            let flags = BltFlags::from_bits_retain(dec.u32()?);
            let rotation = match dec.u8()? {
                0 => Rotation::Unspecified,
                1 => Rotation::Identity,
                2 => Rotation::Rotate90,
                3 => Rotation::Rotate180,
                4 => Rotation::Rotate270,
                _ => return Err(dec.error("a rotation")),
            };
            Call::Blt(BltArgs {
                dst,
                dst_subresource,
                dst_rect,
                src,
                src_subresource,
                src_rect,
                flags,
                rotation,
            })
        }
        Kind::Rotate => {
            let count = dec.u8()?;
            if usize::from(count) > MAX_ROTATED {
                return Err(dec.error("at most MAX_ROTATED resources"));
            }
            let mut resources = [None; MAX_ROTATED];
            for slot in resources.iter_mut().take(usize::from(count)) {
                *slot = Some(dec.object()?);
            }
            Call::Rotate { count, resources }
        }
        Kind::DestroyDevice => Call::DestroyDevice,
        Kind::GammaCaps => Call::GammaCaps,
        Kind::SetDisplayMode => Call::SetDisplayMode {
            primary: dec.object()?,
            subresource: dec.u32()?,
        },
        Kind::SetPriority => Call::SetPriority {
            resource: dec.object()?,
            priority: dec.u32()?,
        },
        Kind::QueryResidency => Call::QueryResidency(dec.u32()?),
        Kind::QuerySignaled => Call::QuerySignaled(dec.object()?),
        Kind::ResourceIsBusy => Call::ResourceIsBusy(dec.object()?),
        Kind::Trim => Call::Trim,
        Kind::Answer => Call::Answer(dec.u64()?),
        Kind::Checksum => Call::Checksum {
            resource: dec.object()?,
            crc: dec.u32()?,
        },
        Kind::MapUnmap => {
            let resource = dec.object()?;
            let ty = map_type_of(dec.u8()?).ok_or(dec.error("a Map type"))?;
            let flags = MapFlags::from_bits_retain(dec.u32()?);
            let written = dec.bytes()?;
            let unmap_seq = dec.u64()?;
            let code = dec.u8()?;
            let unmap_outcome = Outcome::of_code(code).ok_or(dec.error("an outcome"))?;
            Call::MapUnmap {
                resource,
                ty,
                flags,
                written,
                unmap_seq,
                unmap_outcome,
            }
        }
    };
    dec.finish()?;
    Ok(Record { seq, outcome, call })
}

/// Writes a driver command as [`encode_call`] wants it: whether the driver can capture it,
/// then the command.
pub(crate) fn encode_command<C: crate::driver::Command>(command: &C, enc: &mut Encoder<'_>) {
    match C::CAPTURABLE {
        true => {
            enc.u8(1);
            command.encode_capture(enc);
        }
        false => enc.u8(0),
    }
}

fn decode_bool(dec: &mut Decoder<'_, '_>) -> Result<bool, DecodeError> {
    match dec.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(dec.error("a flag")),
    }
}

fn decode_list(dec: &mut Decoder<'_, '_>) -> Result<ListId, DecodeError> {
    Ok(ListId {
        stream: dec.u32()?,
        finish: dec.u64()?,
    })
}

fn map_type_code(ty: MapType) -> u8 {
    match ty {
        MapType::Read => 1,
        MapType::Write => 2,
        MapType::ReadWrite => 3,
        MapType::WriteDiscard => 4,
        MapType::WriteNoOverwrite => 5,
    }
}

fn map_type_of(code: u8) -> Option<MapType> {
    Some(match code {
        1 => MapType::Read,
        2 => MapType::Write,
        3 => MapType::ReadWrite,
        4 => MapType::WriteDiscard,
        5 => MapType::WriteNoOverwrite,
        _ => return None,
    })
}

fn encode_rect(r: Rect, enc: &mut Encoder<'_>) {
    for v in [r.left, r.top, r.right, r.bottom] {
        enc.u32(v);
    }
}

fn decode_rect(dec: &mut Decoder<'_, '_>) -> Result<Rect, DecodeError> {
    Ok(Rect {
        left: dec.u32()?,
        top: dec.u32()?,
        right: dec.u32()?,
        bottom: dec.u32()?,
    })
}

fn encode_resource(d: &ResourceDesc, enc: &mut Encoder<'_>) {
    enc.u64(d.byte_size);
    enc.u32(d.bind.bits());
    enc.u8(match d.usage {
        Usage::Default => 0,
        Usage::Immutable => 1,
        Usage::Dynamic => 2,
        Usage::Staging => 3,
    });
    enc.u32(d.flags.bits());
    match d.texture {
        Some(t) => {
            enc.u8(1);
            enc.u32(t.width);
            enc.u32(t.height);
            enc.u16(t.array_size);
            enc.u8(t.mip_levels);
            enc.u8(t.samples);
            enc.u32(t.format);
        }
        None => enc.u8(0),
    }
}

fn decode_resource(dec: &mut Decoder<'_, '_>) -> Result<ResourceDesc, DecodeError> {
    let byte_size = dec.u64()?;
    let bind = BindFlags::from_bits_retain(dec.u32()?);
    let usage = match dec.u8()? {
        0 => Usage::Default,
        1 => Usage::Immutable,
        2 => Usage::Dynamic,
        3 => Usage::Staging,
        _ => return Err(dec.error("a usage")),
    };
    let flags = ResourceFlags::from_bits_retain(dec.u32()?);
    let texture = match dec.u8()? {
        0 => None,
        1 => Some(Texture2d {
            width: dec.u32()?,
            height: dec.u32()?,
            array_size: dec.u16()?,
            mip_levels: dec.u8()?,
            samples: dec.u8()?,
            format: dec.u32()?,
        }),
        _ => return Err(dec.error("whether a resource is a texture")),
    };
    Ok(ResourceDesc {
        byte_size,
        bind,
        usage,
        flags,
        texture,
    })
}

fn encode_desc(desc: &ObjectDesc<'_>, enc: &mut Encoder<'_>) {
    match *desc {
        ObjectDesc::Resource(r) => {
            enc.u8(0);
            encode_resource(&r, enc);
        }
        ObjectDesc::View { ty, desc } => {
            enc.u8(1);
            enc.u8(ty.to_raw() as u8);
            enc.object(desc.resource);
            enc.u64(desc.first_byte);
            enc.u64(desc.byte_len);
        }
        ObjectDesc::Shader(code) => {
            enc.u8(2);
            enc.bytes(code);
        }
        ObjectDesc::ElementLayout(layout) => {
            enc.u8(3);
            enc.bytes(layout);
        }
        ObjectDesc::State { ty, desc } => {
            enc.u8(4);
            enc.u8(ty.to_raw() as u8);
            enc.bytes(desc);
        }
        ObjectDesc::Query(kind) => {
            enc.u8(5);
            enc.u8(match kind {
                QueryKind::Event => 0,
                QueryKind::Occlusion => 1,
                QueryKind::Timestamp => 2,
            });
        }
    }
}

fn decode_desc<'a>(dec: &mut Decoder<'a, '_>) -> Result<ObjectDesc<'a>, DecodeError> {
    let ty = |dec: &mut Decoder<'a, '_>| {
        let raw = dec.u8()?;
        HandleType::from_raw(u32::from(raw)).map_err(|_| dec.error("a handle type"))
    };
    Ok(match dec.u8()? {
        0 => ObjectDesc::Resource(decode_resource(dec)?),
        1 => ObjectDesc::View {
            ty: ty(dec)?,
            desc: ViewDesc {
                resource: dec.object()?,
                first_byte: dec.u64()?,
                byte_len: dec.u64()?,
            },
        },
        2 => ObjectDesc::Shader(dec.bytes()?),
        3 => ObjectDesc::ElementLayout(dec.bytes()?),
        4 => ObjectDesc::State {
            ty: ty(dec)?,
            desc: dec.bytes()?,
        },
        5 => ObjectDesc::Query(match dec.u8()? {
            0 => QueryKind::Event,
            1 => QueryKind::Occlusion,
            2 => QueryKind::Timestamp,
            _ => return Err(dec.error("a query kind")),
        }),
        _ => return Err(dec.error("an object description")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::{BindClass, BindPoint, Stage};
    use crate::handle::AnyHandle;

    /// A command of the tests': one object.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Touch(Handle<Resource>);

    impl crate::driver::Command for Touch {
        fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle)) {
            visit(self.0.any());
        }
        const CAPTURABLE: bool = true;
        fn encode_capture(&self, enc: &mut Encoder<'_>) {
            enc.object(self.0);
        }
    }

    impl CaptureCommand for Touch {
        fn encode(&self, enc: &mut Encoder<'_>) {
            enc.object(self.0);
        }
        fn decode(dec: &mut Decoder<'_, '_>) -> Result<Self, DecodeError> {
            Ok(Touch(dec.object()?))
        }
    }

    fn handle<T: crate::handle::ObjectKind>(bits: u64) -> Handle<T> {
        Handle::from_bits(bits).expect("a handle's bits")
    }

    /// Every kind of record, written and read back, is the record written: flags with bits
    /// no name has included (a shim passes them on).
    #[test]
    fn every_call_round_trips_with_its_unnamed_flag_bits() {
        let r = handle::<Resource>(0x0001_0000_0000_0007);
        let q = handle::<Query>(0x0001_0000_0000_0009);
        let list = ListId {
            stream: 3,
            finish: 5,
        };
        let rect = Rect {
            left: 1,
            top: 2,
            right: 3,
            bottom: 4,
        };
        let mut rotated = [None; MAX_ROTATED];
        rotated[0] = Some(r);
        let desc = ResourceDesc {
            byte_size: 64,
            bind: BindFlags::from_bits_retain(0x4000_0000),
            ..Default::default()
        };
        let calls: Vec<Call<'_, Touch>> = vec![
            Call::Create {
                desc: ObjectDesc::Resource(desc),
                made: r.to_bits(),
            },
            Call::Destroy(r.any()),
            Call::CreateDeferred(2),
            Call::DropList(list),
            Call::CreatePrimary { desc, made: 9 },
            Call::DestroyPrimary(r),
            Call::Command(Touch(r)),
            Call::Update {
                resource: r,
                offset: 8,
                data: b"bytes",
            },
            Call::Bind {
                point: BindPoint::new(BindClass::ConstantBuffer(Stage::Pixel), 3),
                object: Some(r.any()),
            },
            Call::Map {
                resource: r,
                ty: MapType::Read,
                flags: MapFlags::from_bits_retain(0x0010_0000 | 0x1),
            },
            Call::Written {
                resource: r,
                bytes: b"written",
            },
            Call::Unmap(r),
            Call::BeginQuery(q),
            Call::EndQuery(q),
            Call::Finish { restoring: true },
            Call::Abandon,
            Call::Execute {
                list,
                restoring: false,
            },
            Call::Flush,
            Call::EndFrame,
            Call::ClearState,
            Call::Present(PresentArgs {
                src: r,
                src_subresource: 1,
                dst: Some((r, 2)),
                dxgi_context: DxgiContext(77),
                flags: PresentFlags::from_bits_retain(0x8000_0001),
                flip_interval: 1,
            }),
            Call::Blt(BltArgs {
                dst: r,
                dst_subresource: 0,
                dst_rect: rect,
                src: r,
                src_subresource: 1,
                src_rect: Some(rect),
                flags: BltFlags::from_bits_retain(0x100 | 0x4),
                rotation: Rotation::Rotate90,
            }),
            Call::Rotate {
                count: 1,
                resources: rotated,
            },
            Call::DestroyDevice,
            Call::MapUnmap {
                resource: r,
                ty: MapType::WriteDiscard,
                flags: MapFlags::empty(),
                written: b"ring",
                unmap_seq: 12,
                unmap_outcome: Outcome::Err(Error::Application(AppError::StaleHandle)),
            },
            Call::GammaCaps,
            Call::SetDisplayMode {
                primary: r,
                subresource: 0,
            },
            Call::SetPriority {
                resource: r,
                priority: 5,
            },
            Call::QueryResidency(4),
            Call::QuerySignaled(q),
            Call::ResourceIsBusy(r),
            Call::Trim,
            Call::Checksum {
                resource: r,
                crc: 0xDEAD_BEEF,
            },
            Call::Answer(0x1_0000_0007),
        ];
        assert_eq!(calls.len(), KINDS.len(), "one of each kind");
        // And the other arms of the kinds with more than one: a bind of nothing, every Map
        // type, every rotation with and without a source rectangle, a present without a
        // destination, the longest rotation of identities.
        let mut others: Vec<Call<'_, Touch>> = vec![
            Call::Bind {
                point: BindPoint::new(BindClass::ConstantBuffer(Stage::Pixel), 3),
                object: None,
            },
            Call::Present(PresentArgs {
                src: r,
                src_subresource: 0,
                dst: None,
                dxgi_context: DxgiContext(0),
                flags: PresentFlags::empty(),
                flip_interval: 0,
            }),
            Call::Rotate {
                count: MAX_ROTATED as u8,
                resources: [Some(r); MAX_ROTATED],
            },
        ];
        let texture = Texture2d {
            width: 4,
            height: 2,
            array_size: 3,
            mip_levels: 2,
            samples: 1,
            format: 87,
        };
        for usage in [
            Usage::Default,
            Usage::Immutable,
            Usage::Dynamic,
            Usage::Staging,
        ] {
            let desc = ResourceDesc {
                usage,
                texture: Some(texture),
                ..desc
            };
            others.push(Call::Create {
                desc: ObjectDesc::Resource(desc),
                made: 1,
            });
        }
        let view = ViewDesc {
            resource: r,
            first_byte: 16,
            byte_len: 32,
        };
        let descs = [
            ObjectDesc::View {
                ty: HandleType::ShaderResourceView,
                desc: view,
            },
            ObjectDesc::Shader(b"dxbc"),
            ObjectDesc::ElementLayout(b"layout"),
            ObjectDesc::State {
                ty: HandleType::BlendState,
                desc: b"blend",
            },
            ObjectDesc::Query(QueryKind::Event),
            ObjectDesc::Query(QueryKind::Occlusion),
            ObjectDesc::Query(QueryKind::Timestamp),
        ];
        for desc in descs {
            others.push(Call::Create { desc, made: 2 });
        }
        for ty in [
            MapType::Read,
            MapType::Write,
            MapType::ReadWrite,
            MapType::WriteDiscard,
            MapType::WriteNoOverwrite,
        ] {
            others.push(Call::Map {
                resource: r,
                ty,
                flags: MapFlags::empty(),
            });
        }
        let rotations = [
            Rotation::Unspecified,
            Rotation::Identity,
            Rotation::Rotate90,
            Rotation::Rotate180,
            Rotation::Rotate270,
        ];
        for (rotation, src_rect) in rotations
            .into_iter()
            .zip([None, Some(rect)].into_iter().cycle())
        {
            others.push(Call::Blt(BltArgs {
                dst: r,
                dst_subresource: 0,
                dst_rect: rect,
                src: r,
                src_subresource: 0,
                src_rect,
                flags: BltFlags::empty(),
                rotation,
            }));
        }
        for (i, call) in calls.into_iter().chain(others).enumerate() {
            let kind = call.kind();
            let record = Record {
                seq: if call.on_device_stream() {
                    i as u64
                } else {
                    40 + i as u64
                },
                outcome: Outcome::Err(Error::WasStillDrawing),
                call,
            };
            let mut bytes = Vec::new();
            encode_record(&record, &mut Encoder::new(&mut bytes), |c, enc| {
                encode_command(c, enc)
            });
            let mut same = |bits: u64| AnyHandle::from_bits(bits);
            let mut dec = Decoder::new(&bytes, &mut same);
            let back = decode_record::<Touch>(kind as u16, i as u64, &mut dec)
                .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            assert_eq!(back, record, "{kind:?}");
        }
    }

    /// A rotation of more identities than a swap chain has is no record.
    #[test]
    fn a_rotation_of_more_than_max_rotated_is_refused() {
        let mut bytes = 7u64.to_le_bytes().to_vec();
        bytes.extend([0, MAX_ROTATED as u8 + 1]);
        for _ in 0..=MAX_ROTATED {
            bytes.extend(0x0001_0000_0000_0007u64.to_le_bytes());
        }
        let mut same = |bits: u64| AnyHandle::from_bits(bits);
        let mut dec = Decoder::new(&bytes, &mut same);
        let e = decode_record::<Touch>(Kind::Rotate as u16, 0, &mut dec).unwrap_err();
        assert_eq!(e.what, "at most MAX_ROTATED resources");
    }

    /// A command its driver could not capture (the byte before it 0) is named as such; a
    /// byte that is neither 0 nor 1 as a record that is not one.
    #[test]
    fn a_command_no_driver_captured_is_named() {
        for (flag, what) in [
            (0, "a command its driver could capture"),
            (2, "whether the command was captured"),
        ] {
            let mut bytes = 7u64.to_le_bytes().to_vec();
            bytes.extend([0, flag]);
            let mut same = |bits: u64| AnyHandle::from_bits(bits);
            let mut dec = Decoder::new(&bytes, &mut same);
            let e = decode_record::<Touch>(Kind::Command as u16, 0, &mut dec).unwrap_err();
            assert_eq!((e.at, e.what), (10, what), "after the flag");
            assert_eq!(e.to_string(), format!("byte 10 of the record: {what}"));
        }
    }
}
