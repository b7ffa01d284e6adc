//! The soft driver's own command lists ([`crate::ListMode::DriverBuilt`],
//! [`super::SoftConfig::driver_built`]): its deferred context encodes every recorded call
//! into a buffer of packets on the recording thread, validating each named object through
//! the context-local block it filled at open; Finish hands the buffer to the list; the
//! immediate context's CommandListExecute runs it, and the buffers of the lists it chained,
//! with no operation of the list reaching [`crate::Driver::execute`].
//!
//! The world checks the engine on the way (each a [`super::Violation`]):
//! - a command of a driver-built list that reaches [`crate::Driver::execute`]
//!   ([`crate::Resolver::in_command_list`] during an operation);
//! - a deferred-context hook that writes immediate-context data (kernel memory, the
//!   immediate context's bindings): [`DeferredHook`] marks the thread while one runs;
//! - a command executed twice or never in one execute: every packet has a serial, every
//!   list the count and sum of the serials it runs (its chained lists' as they were when
//!   chained), compared with what the execute ran;
//! - a context-local block used after its close: the world keeps the open (context, object)
//!   pairs, and a recorded call naming an object must find its block open and its own.

use std::cell::Cell;
use std::ops::Range;
use std::sync::Arc;

use crate::bind::BindPoint;
use crate::cls::local_handles::LocalHandles;
use crate::driver::{Command, DeferredCall, Op};
use crate::error::{Error, Result};
use crate::handle::{AnyHandle, Handle, Query, Resource};
use crate::kernel::DeferredId;
use crate::registry::Resolver;

use super::driver::{cls_ids, flag_ic_write, SoftCommand, SoftDeferred, SoftDriver};
use super::inject::SameTypes;
use super::lifetime::Lifetimes;
use super::world::{Hook, SoftWorld, State, TraceEvent};

thread_local! {
    /// Whether a deferred-context hook of the soft driver runs on this thread.
    static IN_DEFERRED_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as inside a deferred-context hook until dropped.
pub(crate) struct DeferredHook(bool);

impl DeferredHook {
    pub(crate) fn enter() -> Self {
        DeferredHook(IN_DEFERRED_HOOK.with(|h| h.replace(true)))
    }

    /// Whether a deferred-context hook runs on this thread now.
    pub(crate) fn running() -> bool {
        IN_DEFERRED_HOOK.with(Cell::get)
    }
}

impl Drop for DeferredHook {
    fn drop(&mut self) {
        IN_DEFERRED_HOOK.with(|h| h.set(self.0));
    }
}

/// One encoded call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Packet {
    /// A copy of `len` bytes from the start of `src` to the start of `dst`, the length taken
    /// from the sizes the two context-local blocks recorded at open.
    Copy {
        dst: Handle<Resource>,
        src: Handle<Resource>,
        len: u64,
    },
    /// Any other command, run as the immediate context runs it.
    Command(SoftCommand),
    /// UpdateSubresource; its bytes are `data` of the list's byte arena.
    Update {
        resource: Handle<Resource>,
        offset: u64,
        data: Range<usize>,
    },
    /// The new contents written through a Map(DISCARD): `data` of the list's byte arena.
    WriteDiscard {
        resource: Handle<Resource>,
        data: Range<usize>,
    },
    Bind {
        point: BindPoint,
        object: Option<AnyHandle>,
    },
    /// A query's Begin or End: it references the query's memory.
    Query(Handle<Query>),
    /// The execution of a finished list (by its id), then the clear-state after it (R-C3).
    Chain(u64),
}

/// What a run of a list performs: how many packets, and the wrapping sum of their serials'
/// mixes, so that one packet run twice and another never still shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Runs {
    pub(crate) count: u64,
    sum: u64,
}

impl Runs {
    pub(crate) fn add_serial(&mut self, serial: u64) {
        self.count = self.count.wrapping_add(1);
        self.sum = self
            .sum
            .wrapping_add(serial.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17));
    }

    pub(crate) fn add(&mut self, other: Runs) {
        self.count = self.count.wrapping_add(other.count);
        self.sum = self.sum.wrapping_add(other.sum);
    }
}

/// A deferred context's list being built.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Building {
    /// Packets with their serials (0 for a chain, which runs its list's).
    pub(crate) packets: Vec<(u64, Packet)>,
    /// The packets' bytes (updates, Map contents), one arena per list.
    pub(crate) bytes: Vec<u8>,
    pub(crate) expected: Runs,
    /// Open Map(DISCARD)s: the memory handed out, until the Unmap encodes it.
    pub(crate) mapped: Vec<(Handle<Resource>, Vec<u8>)>,
    /// Each resource's last Map(DISCARD) in this list: where its bytes lie in `bytes`, which
    /// a Map(NO_OVERWRITE) hands out again (R-M2).
    pub(crate) discarded: Vec<(Handle<Resource>, Range<usize>)>,
    /// Open Map(NO_OVERWRITE)s: their Unmap encodes nothing (the bytes are the discard's).
    pub(crate) mapped_again: Vec<Handle<Resource>>,
    /// Map memory given back by Unmaps, for the next Maps.
    pub(crate) spare_maps: Vec<Vec<u8>>,
    /// A recycled list's buffer, for the next Finish: steady state allocates nothing.
    pub(crate) spare: Option<Built>,
}

impl Building {
    /// The list built so far, for Finish, in the spare buffer when there is one; the
    /// context starts the next one empty, in the list's old memory.
    pub(crate) fn take(&mut self) -> Built {
        let mut list = self
            .spare
            .take()
            .filter(|spare| Arc::strong_count(spare) == 1)
            .unwrap_or_default();
        let built = Arc::get_mut(&mut list).expect("a new or unshared buffer");
        built.packets.clear();
        built.bytes.clear();
        core::mem::swap(&mut built.packets, &mut self.packets);
        core::mem::swap(&mut built.bytes, &mut self.bytes);
        built.expected = core::mem::take(&mut self.expected);
        self.discarded.clear();
        list
    }

    /// Forgets what was recorded (Abandon).
    pub(crate) fn clear(&mut self) {
        self.packets.clear();
        self.bytes.clear();
        let mapped = self.mapped.drain(..).map(|(_, bytes)| bytes);
        self.spare_maps.extend(mapped);
        self.expected = Runs::default();
        self.discarded.clear();
        self.mapped_again.clear();
    }

    /// Copies `data` into the arena; where it lies.
    fn keep(&mut self, data: &[u8]) -> Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(data);
        start..self.bytes.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.packets.is_empty() && self.mapped.is_empty() && self.mapped_again.is_empty()
    }
}

/// A finished list's buffer, kept by the world under the list's id.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct BuiltList {
    pub(crate) packets: Vec<(u64, Packet)>,
    /// The packets' bytes.
    pub(crate) bytes: Vec<u8>,
    /// What one run of it performs, chained lists included.
    pub(crate) expected: Runs,
}

/// A shared finished list's buffer.
pub(crate) type Built = Arc<BuiltList>;

/// The objects a recorded call names (at most two for the soft driver's commands).
fn named<W: SameTypes<SoftDriver>>(call: &DeferredCall<'_, W>) -> [Option<AnyHandle>; 2] {
    let mut named = [None; 2];
    match call {
        DeferredCall::Command(command) => {
            let mut at = 0;
            command.for_each_object(&mut |h| {
                if let Some(slot) = named.get_mut(at) {
                    *slot = Some(h);
                }
                at += 1;
            });
        }
        DeferredCall::Update { resource, .. }
        | DeferredCall::MapDiscard { resource, .. }
        | DeferredCall::MapNoOverwrite { resource, .. }
        | DeferredCall::Unmap { resource, .. } => named[0] = Some(resource.any()),
        DeferredCall::Bind { object, .. } => named[0] = *object,
        DeferredCall::BeginQuery(q) | DeferredCall::EndQuery(q) => named[0] = Some(q.any()),
    }
    named
}

/// Checks that `handle`'s context-local block in context `dc` is open and its own (R-H1,
/// R-H2); returns the object id the block holds (0 if there is no block), for the trace.
fn check_local<W: SameTypes<SoftDriver>>(
    s: &mut State,
    dc: DeferredId,
    locals: &mut LocalHandles<'_, W>,
    handle: AnyHandle,
) -> u64 {
    let Some(local) = locals.get(handle) else {
        let what = format!("a recorded call names {handle:?}, which has no open local handle");
        SoftWorld::violate(s, "R-H1", what);
        return 0;
    };
    let id = local.view.object().id;
    let (block_id, _) = cls_ids(local.local);
    if !s.open_locals.contains_key(&(dc.get(), id)) {
        let what = format!("object {id}'s context-local block used after its close");
        SoftWorld::violate(s, "R-H2", what);
    } else if block_id != id {
        let what = format!("object {id} recorded through the CLS of object {block_id}");
        SoftWorld::violate(s, "R-H2", what);
    }
    block_id
}

/// The byte size a resource's context-local block recorded at open (0 if none).
fn size_in_block<W: SameTypes<SoftDriver>>(
    locals: &mut LocalHandles<'_, W>,
    resource: Handle<Resource>,
) -> u64 {
    locals
        .get(resource.any())
        .and_then(|l| l.local.get(16..24).map(|b| b.try_into().expect("8 bytes")))
        .map_or(0, u64::from_le_bytes)
}

impl SoftDriver {
    /// [`crate::Driver::record_deferred`] for the engine running driver `W`: checks the
    /// named objects' blocks, traces the call and, building lists, encodes it.
    pub(crate) fn record_for<W: SameTypes<Self>>(
        &self,
        dc: &mut SoftDeferred,
        call: DeferredCall<'_, W>,
        locals: &mut LocalHandles<'_, W>,
    ) -> Result<()> {
        let _hook = DeferredHook::enter();
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "record_deferred");
        let mut first = 0;
        for handle in named(&call).into_iter().flatten() {
            let id = check_local(&mut s, dc.id, locals, handle);
            if first == 0 {
                first = id;
            }
        }
        let event = TraceEvent::of(Hook::RecordDeferred)
            .object(first)
            .state(locals.state().len())
            .context(dc.id);
        self.world.note(&mut s, event);
        if !self.builds_lists() {
            return Ok(());
        }
        let packet = match call {
            DeferredCall::Command(&SoftCommand::Copy { dst, src }) => {
                let len = size_in_block(locals, dst).min(size_in_block(locals, src));
                Packet::Copy { dst, src, len }
            }
            DeferredCall::Command(command) => Packet::Command(*command),
            DeferredCall::Update {
                resource,
                offset,
                data,
            } => Packet::Update {
                resource,
                offset,
                data: dc.building.keep(data),
            },
            DeferredCall::Unmap { resource, .. } => {
                let again = &mut dc.building.mapped_again;
                if let Some(at) = again.iter().position(|r| *r == resource) {
                    // A Map(NO_OVERWRITE): written in place, in the discard's bytes.
                    again.swap_remove(at);
                    return Ok(());
                }
                let mapped = &mut dc.building.mapped;
                let Some(at) = mapped.iter().position(|(r, _)| *r == resource) else {
                    let what = format!("Unmap of {resource:?}, which the driver never mapped");
                    SoftWorld::violate(&mut s, "driver-built", what);
                    return Ok(());
                };
                let (_, contents) = mapped.swap_remove(at);
                let data = dc.building.keep(&contents);
                dc.building.spare_maps.push(contents);
                let discarded = &mut dc.building.discarded;
                match discarded.iter_mut().find(|(r, _)| *r == resource) {
                    Some((_, range)) => *range = data.clone(),
                    None => discarded.push((resource, data.clone())),
                }
                Packet::WriteDiscard { resource, data }
            }
            DeferredCall::Bind { point, object } => Packet::Bind { point, object },
            DeferredCall::BeginQuery(q) | DeferredCall::EndQuery(q) => Packet::Query(q),
            _ => {
                let what = "a call the engine keeps for itself reached a driver that builds \
                            its lists (the Map of replayed lists)";
                SoftWorld::violate(&mut s, "driver-built", what.to_string());
                return Ok(());
            }
        };
        s.next_serial += 1;
        let serial = s.next_serial;
        dc.building.expected.add_serial(serial);
        dc.building.packets.push((serial, packet));
        Ok(())
    }

    /// [`crate::Driver::map_discard_deferred`] for the engine running driver `W`: zeroed
    /// bytes of the context's own, encoded at the Unmap.
    pub(crate) fn map_discard_for<'a, W: SameTypes<Self>>(
        &self,
        dc: &'a mut SoftDeferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, W>,
    ) -> Result<&'a mut [u8]> {
        let _hook = DeferredHook::enter();
        {
            let mut s = self.world.lock();
            self.deferred_hook(&mut s, "map_discard_deferred");
            let id = check_local(&mut s, dc.id, locals, resource.any());
            let event = TraceEvent::of(Hook::MapDiscardDeferred)
                .object(id)
                .context(dc.id);
            self.world.note(&mut s, event);
            if !self.builds_lists() {
                let what = "map_discard_deferred called where the engine replays lists";
                SoftWorld::violate(&mut s, "driver-built", what.to_string());
            }
        }
        let mut bytes = dc.building.spare_maps.pop().unwrap_or_default();
        bytes.clear();
        bytes.try_reserve(len).map_err(|_| Error::OutOfMemory)?;
        bytes.resize(len, 0);
        dc.building.mapped.push((resource, bytes));
        let (_, bytes) = dc.building.mapped.last_mut().expect("just pushed");
        Ok(bytes)
    }

    /// [`crate::Driver::map_no_overwrite_deferred`] for the engine running driver `W`: the
    /// bytes of the resource's last Map(DISCARD) in this list, in the list's arena, written
    /// in place (R-M2).
    pub(crate) fn map_no_overwrite_for<'a, W: SameTypes<Self>>(
        &self,
        dc: &'a mut SoftDeferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, W>,
    ) -> Result<&'a mut [u8]> {
        let _hook = DeferredHook::enter();
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "map_no_overwrite_deferred");
        let id = check_local(&mut s, dc.id, locals, resource.any());
        let event = TraceEvent::of(Hook::MapNoOverwriteDeferred)
            .object(id)
            .context(dc.id);
        self.world.note(&mut s, event);
        let building = &mut dc.building;
        let Some((_, range)) = building.discarded.iter().find(|(r, _)| *r == resource) else {
            let what = format!("Map(NO_OVERWRITE) of {resource:?} with no discard in the list");
            SoftWorld::violate(&mut s, "R-M2", what);
            return Err(Error::InvalidArg);
        };
        if range.len() != len {
            let what = format!("Map(NO_OVERWRITE) of {len} bytes after a discard of {range:?}");
            SoftWorld::violate(&mut s, "R-M2", what);
        }
        let range = range.clone();
        building.mapped_again.push(resource);
        Ok(&mut building.bytes[range])
    }

    /// Chains finished list `inner` into the context's list (its execute on a deferred
    /// context, building lists).
    pub(crate) fn chain(&self, s: &mut State, dc: &mut SoftDeferred, inner: u64) {
        let Some(expected) = s.built.get(&inner).map(|b| b.expected) else {
            let what = format!("list {inner} chained with no buffer built");
            SoftWorld::violate(s, "R-R8", what);
            return;
        };
        dc.building.expected.add(expected);
        dc.building.packets.push((0, Packet::Chain(inner)));
    }

    /// Finish: the context's buffer becomes list `id`'s.
    pub(crate) fn finish_built(&self, s: &mut State, dc: &mut SoftDeferred, id: u64) {
        if !dc.building.mapped.is_empty() {
            let what = format!("list {id} finished with a resource still mapped");
            SoftWorld::violate(s, "R-C4", what);
        }
        let built = dc.building.take();
        s.built.insert(id, built);
    }

    /// CommandListExecute of driver-built list `id` on the immediate context: runs its
    /// packets and those of the lists it chained, each chained list followed by a
    /// clear-state, and the whole starting and ending in the clear state (R-C3).
    pub(crate) fn run_built<W: SameTypes<Self>>(
        &self,
        s: &mut State,
        id: u64,
        objects: &Resolver<'_, W>,
    ) -> Result<()> {
        let Some(root) = s.built.get(&id).cloned() else {
            let what = format!("list {id} executed with no buffer built");
            SoftWorld::violate(s, "R-R8", what);
            return Ok(());
        };
        flag_ic_write(s, "the immediate context's bindings");
        s.ic_bound.clear();
        let mut ran = Runs::default();
        let result = self.run_packets(s, &root, objects, &mut ran);
        s.ic_bound.clear();
        if result.is_ok() && ran != root.expected {
            let what = format!(
                "list {id}: {} commands executed where {} were recorded (one executed twice \
                 or never)",
                ran.count, root.expected.count
            );
            SoftWorld::violate(s, "R-C3", what);
        }
        result
    }

    fn run_packets<W: SameTypes<Self>>(
        &self,
        s: &mut State,
        root: &Built,
        objects: &Resolver<'_, W>,
        ran: &mut Runs,
    ) -> Result<()> {
        // An explicit stack (chains nest as deep as lists do), kept: steady state allocates
        // nothing.
        let mut stack = core::mem::take(&mut s.run_stack);
        stack.clear();
        stack.push((Arc::clone(root), 0));
        let result = self.run_stack(s, &mut stack, objects, ran);
        stack.clear();
        s.run_stack = stack;
        result
    }

    fn run_stack<W: SameTypes<Self>>(
        &self,
        s: &mut State,
        stack: &mut Vec<(Built, usize)>,
        objects: &Resolver<'_, W>,
        ran: &mut Runs,
    ) -> Result<()> {
        while let Some((list, at)) = stack.last_mut() {
            let list = Arc::clone(list);
            let Some((serial, packet)) = list.packets.get(*at) else {
                stack.pop();
                if !stack.is_empty() {
                    s.ic_bound.clear(); // the clear-state after a chained list
                }
                continue;
            };
            *at += 1;
            if let Packet::Chain(inner) = packet {
                let Some(inner_list) = s.built.get(inner).cloned() else {
                    let what = format!("chained list {inner} has no buffer any more");
                    SoftWorld::violate(s, "R-R8", what);
                    continue;
                };
                self.note_list_executed(s, *inner);
                s.ic_bound.clear(); // a list starts from the clear state
                stack.push((inner_list, 0));
                continue;
            }
            ran.add_serial(*serial);
            let op = match packet {
                Packet::Copy { dst, src, len } => {
                    let (d, from) = (objects.get(*dst)?, objects.get(*src)?);
                    Self::copy(s, d.allocation(), 0, from.allocation(), 0, *len)?;
                    continue;
                }
                Packet::Command(command) => Op::Command(command),
                Packet::Update {
                    resource,
                    offset,
                    data,
                } => Op::Update {
                    resource: objects.get(*resource)?,
                    offset: *offset,
                    data: &list.bytes[data.clone()],
                },
                Packet::WriteDiscard { resource, data } => Op::WriteDiscard {
                    resource: objects.get(*resource)?,
                    data: &list.bytes[data.clone()],
                },
                Packet::Bind { point, object } => Op::Bind {
                    point: *point,
                    object: match object {
                        Some(h) => Some(objects.get(*h)?),
                        None => None,
                    },
                },
                Packet::Query(q) => Op::EndQuery(objects.get(*q)?),
                Packet::Chain(_) => unreachable!("handled above"),
            };
            self.apply(s, objects, op)?;
        }
        Ok(())
    }

    /// The open buffer reads list `id`'s memory from now on (its recycle waits for it).
    pub(crate) fn note_list_executed(&self, s: &mut State, id: u64) {
        if self.world.config.trace {
            Lifetimes::list_executed(s, id, "execute_command_list");
        }
        if s.list_refs.insert(id, 0) != Some(0) {
            s.open_lists.push(id);
        }
    }
}
