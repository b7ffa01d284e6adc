//! Command lists: see [`CommandList`].

use std::sync::Arc;

use crossbeam_utils::CachePadded;
use scopeguard::ScopeGuard;

use crate::context::device::Device;
use crate::driver::{Driver, ListMemory};
use crate::kernel::Kernel;
use crate::lists::list_clock::ListStamp;
use crate::lists::record::Recording;
use crate::lists::recycle::{DropStack, Node};
use crate::lists::shared::{Owners, Shareable, Shared};
use crate::registry::HeldEntry;
use crate::trace::span;

/// A recording of a deferred context of this device, with the owners of the lists it
/// executes.
pub(crate) type ListRecording<D, K> = Recording<<D as Driver>::Command, SharedList<D, K>>;

/// One owner of a command list: the application's [`CommandList`], or an outer list that
/// executes it.
pub(crate) type SharedList<D, K> = Shared<ListData<D, K>>;

/// What a command list is made of; recycled with its node.
pub(crate) struct ListBody<D: Driver, K: Kernel> {
    pub(crate) rec: Box<CachePadded<ListRecording<D, K>>>,
    /// Objects the list holds (R-H2: their immediate-context handles outlive it).
    pub(crate) held: Vec<HeldEntry<D>>,
    /// The immediate-context command-list handle's memory (R-R2).
    pub(crate) private: Box<[u8]>,
    /// The deferred context's context-local command-list handle's memory (R-R2).
    pub(crate) local: Box<[u8]>,
}

impl<D: Driver, K: Kernel> ListBody<D, K> {
    pub(crate) fn memory(&mut self) -> ListMemory<'_> {
        ListMemory {
            private: &mut self.private,
            local: &mut self.local,
        }
    }

    /// Memory the body keeps, with the node that carries it.
    pub(crate) fn retained_bytes(&self) -> usize {
        core::mem::size_of::<ListNode<D, K>>()
            + self.rec.retained_bytes()
            + self.held.capacity() * core::mem::size_of::<HeldEntry<D>>()
            + self.private.len()
            + self.local.len()
    }

    /// Gives back capacity above what recent lists needed (R-A1's high watermark).
    pub(crate) fn shrink_to(&mut self, watermark: &Watermark) {
        shrink_vec(&mut self.rec.ops, watermark.operations);
        shrink_vec(&mut self.held, watermark.objects);
        shrink_vec(&mut self.rec.maps, watermark.maps);
        shrink_vec(&mut self.rec.queries, watermark.queries);
        shrink_vec(&mut self.rec.lists, watermark.lists);
        if self.rec.payloads.allocated_bytes() > 2 * watermark.payload_bytes + 1024 {
            self.rec.payloads = Default::default();
        }
    }
}

/// Shrinks `v` to `keep` when it holds more than twice that: hysteresis, so steady state
/// never shrinks and regrows.
fn shrink_vec<T>(v: &mut Vec<T>, keep: usize) {
    if v.capacity() > 2 * keep.max(1) {
        v.shrink_to(keep.max(v.len()));
    }
}

/// The largest list contents seen since the last trim.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Watermark {
    pub(crate) operations: usize,
    pub(crate) objects: usize,
    pub(crate) maps: usize,
    pub(crate) queries: usize,
    pub(crate) lists: usize,
    pub(crate) payload_bytes: usize,
}

impl Watermark {
    #[inline(always)]
    pub(crate) fn note<D: Driver, K: Kernel>(&mut self, body: &ListBody<D, K>) {
        self.operations = self.operations.max(body.rec.ops.len());
        self.objects = self.objects.max(body.held.len());
        self.payload_bytes = self.payload_bytes.max(body.rec.payload_bytes);
        // Most lists map nothing, query nothing and execute no list: one test for the
        // three (noted at every Finish).
        let (maps, queries, lists) = (
            body.rec.maps.len(),
            body.rec.queries.len(),
            body.rec.lists.len(),
        );
        if maps | queries | lists != 0 {
            self.maps = self.maps.max(maps);
            self.queries = self.queries.max(queries);
            self.lists = self.lists.max(lists);
        }
    }
}

/// The part of a deferred context that its lists share with it.
pub(crate) struct Home<D: Driver, K: Kernel> {
    /// Destroyed lists waiting for the context's next Finish (R-R7).
    pub(crate) destroyed: DropStack<ListData<D, K>>,
}

/// A list node's value: allocated once, reused across recycling.
pub(crate) struct ListData<D: Driver, K: Kernel> {
    pub(crate) device: Device<D, K>,
    /// Padded: written by whichever thread drops a list, so two contexts' homes must not
    /// share a cache line.
    pub(crate) home: Arc<CachePadded<Home<D, K>>>,
    pub(crate) body: ListBody<D, K>,
    /// The immediate context's buffer that last executed the list, directly or nested in
    /// another list.
    pub(crate) stamp: ListStamp,
    /// The application's [`CommandList`] and the outer lists that execute this one.
    pub(crate) owners: Owners,
    /// Where the driver's side of the list is (R-R4, R-R5).
    pub(crate) state: ListState,
    /// The list's number in the `list` field of its spans (`crate::trace`), given at Finish.
    #[cfg(feature = "trace")]
    pub(crate) trace_id: u64,
    /// The list's name in the device's capture (feature `capture`), given once its Finish
    /// succeeded: a list a failed Finish made and dropped has none, and its drop is not
    /// recorded.
    #[cfg(feature = "capture")]
    pub(crate) capture_id: std::sync::OnceLock<crate::capture::ListId>,
}

/// The driver's side of a list between its (recycle-)create and its end. Every list ends
/// exactly once: with DestroyCommandList from [`ListState::Live`] or
/// [`ListState::RecycleDestroyed`], or, from [`ListState::Cached`], with its context's
/// DestroyDeferredContext (the driver's memory went to that context's cache). An emulated
/// list ([`ListState::Emulated`]) has no driver side and ends without a hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListState {
    /// Created or recycle-created: executable while the application holds it.
    Live,
    /// RecycleDestroyCommandList ran (R-R4): a light destroy, the driver keeps its memory
    /// until the list is recycled into its context's cache, or destroyed for good if that
    /// context goes away first.
    RecycleDestroyed,
    /// RecycleCommandList ran (R-R5): the driver's memory is in its context's cache; the
    /// next RecycleCreateCommandList makes it live again (R-R6).
    Cached,
    /// Made by an emulated deferred context (a driver without command lists): the driver
    /// has no side of it. Its memory is recycled by the engine alone, in this state
    /// throughout, and it ends without a hook.
    Emulated,
}

pub(crate) type ListNode<D, K> = Node<ListData<D, K>>;

impl<D: Driver, K: Kernel> ListData<D, K> {
    /// Whether the immediate context's buffer that last executed the list has not passed
    /// the driver's list clock yet: its memory may still be read. Never for an emulated
    /// list: its operations reached the driver as `Op`s borrowed for the call only, and it
    /// has no driver memory.
    pub(crate) fn in_flight(&self) -> bool {
        self.state != ListState::Emulated && !self.device.shared.list_clock().passed(&self.stamp)
    }
}

/// Ends a list for good (free-threaded): DestroyCommandList unless the list is in its
/// context's cache (its driver memory is then released by DestroyDeferredContext), then its
/// memory is freed, but never while the buffer that executed it may still read it: such a
/// list goes to the device's queue of retired lists, which the immediate context empties
/// after its flushes.
pub(crate) fn release<D: Driver, K: Kernel>(node: Box<ListNode<D, K>>) {
    if node.value.in_flight() {
        // The stack lives in the device the node keeps: reached through a pointer, since the
        // node moves into it.
        let retired: *const DropStack<ListData<D, K>> = node.value.device.shared.retired_lists();
        // SAFETY: the node keeps its device, and with it `retired_lists`, alive until the
        // node is dropped; `push` reads the stack only until its CAS publishes the node, and
        // a refused node comes back to this thread, which still owns it (and its device).
        if let Err(back) = unsafe { &*retired }.push(node) {
            // The device is destroyed: the GPU is idle, nothing reads the memory any more.
            free_now(back);
        }
        return;
    }
    free_now(node);
}

/// Ends a list that never became a [`CommandList`] (a Finish that failed or unwound after
/// making it): the holds it took are released, then the list is ended for good (never
/// executed, it is freed at once, with its owners of the lists it executes).
pub(crate) fn end_unfinished<D: Driver, K: Kernel>(mut node: Box<ListNode<D, K>>) {
    release_holds(&mut node.value);
    release(node);
}

/// Releases what a list holds (no hook runs, no lookup, no pin).
#[inline]
fn release_holds<D: Driver, K: Kernel>(data: &mut ListData<D, K>) {
    // Popped one by one (a list holds a few objects, often one or two): no unrolled loop
    // to enter, and a hold released is out of the vector.
    while let Some(held) = data.body.held.pop() {
        held.release();
    }
}

impl<D: Driver, K: Kernel> Shareable for ListData<D, K> {
    fn owners(&self) -> &Owners {
        &self.owners
    }

    /// Nothing can execute the list any more: it ends, and so does every list it executes
    /// whose last owner it was, one after the other (a chain of nested lists of any depth
    /// ends without recursion). Inlined into the drop: the common case, nothing nested, is
    /// a test and a jump.
    #[inline]
    fn last_owner_gone(node: Box<ListNode<D, K>>) {
        if node.value.body.rec.lists.is_empty() {
            let _span = span!("destroy_list", list = node.value.trace_id);
            end_unexecutable(node);
        } else {
            end_with_nested(node);
        }
    }
}

/// [`Shareable::last_owner_gone`] for a list that executed others.
#[inline(never)]
fn end_with_nested<D: Driver, K: Kernel>(mut node: Box<ListNode<D, K>>) {
    // The list's vector of executed lists becomes the work list: each nested list that
    // ends moves its own executed lists into it (keeping its vector's capacity), and the
    // vector goes back to the list, empty, when the list goes home after them. So ending
    // a warm frame's nested lists allocates nothing.
    let work = core::mem::take(&mut node.value.body.rec.lists);
    let root = {
        let _span = span!("destroy_list", list = node.value.trace_id);
        begin_end(node)
    };
    // Also if ending a nested list panics: the lists not reached yet go home with it.
    let mut ending = scopeguard::guard((root, work), |(root, work)| {
        if let Some(mut root) = root {
            root.value.body.rec.lists = work;
            send_home(root);
        }
    });
    while let Some(owner) = ending.1.pop() {
        if let Some(mut inner) = owner.release() {
            // Each list that ends has its own span, nested ones included.
            let _span = span!("destroy_list", list = inner.value.trace_id);
            ending.1.append(&mut inner.value.body.rec.lists);
            end_unexecutable(inner);
        }
    }
}

/// The end of a list nobody can execute any more (R-R4): its holds are released; while its
/// context lives and the device recycles, RecycleDestroyCommandList and the list goes to its
/// context's inbox; otherwise it ends for good.
#[inline]
fn end_unexecutable<D: Driver, K: Kernel>(node: Box<ListNode<D, K>>) {
    if let Some(node) = begin_end(node) {
        send_home(node);
    }
}

/// [`end_unexecutable`] but for the trip home: the list's holds released, and either the
/// list ended for good (`None`), or RecycleDestroyCommandList done (where it has a driver
/// side) and the list returned for [`send_home`].
#[inline(always)]
fn begin_end<D: Driver, K: Kernel>(mut node: Box<ListNode<D, K>>) -> Option<Box<ListNode<D, K>>> {
    release_holds(&mut node.value);
    if !node.value.device.shared.recycles() || node.value.home.destroyed.is_closed() {
        release(node);
        return None;
    }
    if node.value.state == ListState::Emulated {
        // No driver side to light-destroy.
        return Some(node);
    }
    // Light-destroyed from the hook on: if it panics, the list still goes to its
    // context, which recycles it or ends it with DestroyCommandList (R-R4).
    node.value.state = ListState::RecycleDestroyed;
    let mut node = scopeguard::guard_on_unwind(node, send_home);
    let data = &mut node.value;
    let driver = data.device.shared.driver();
    driver.recycle_destroy_command_list(data.body.memory());
    Some(ScopeGuard::into_inner(node))
}

/// [`release`] without the clock check (the caller knows the memory is not read).
#[allow(clippy::boxed_local)]
pub(crate) fn free_now<D: Driver, K: Kernel>(mut node: Box<ListNode<D, K>>) {
    let data = &mut node.value;
    if !matches!(data.state, ListState::Cached | ListState::Emulated) {
        data.device
            .shared
            .driver()
            .destroy_command_list(data.body.memory());
    }
}

/// A command list. Dropping it is the free-threaded destroy.
///
/// A finished recording: `Send + Sync`, executable on the immediate context any number of
/// times (CommandListExecute, R-C3), and by deferred contexts of its device, which record
/// its execution into their own lists ([`crate::DeferredContext::execute_command_list`]);
/// destroyed by dropping it, on any thread (R-R4, R-R7). A list that outer lists or
/// recordings execute ends when the last of them and its `CommandList` are gone: until
/// then it stays executable, holds its objects and keeps its memory.
///
/// # A list's life
/// Each transition, the hook it runs, on which thread, and what holds (the owners: the
/// [`crate::DeferredContext`] while recording, the [`CommandList`] value while the application
/// has it, the context's `ListPool` or the device's queue of retired lists after):
///
/// - **Recording**, on the deferred context's thread: operations and payloads go into the
///   context's recording; each object named opens a context-local handle that holds it
///   (`open_local`, R-H1..R-H5). No list exists yet.
/// - **Finished** (Finish, the context's thread, R-R7 in order): destroyed lists whose buffer
///   passed the list clock are recycled into the pool (`recycle_command_list`, R-R5); a
///   cached list is made valid (`recycle_create_command_list`, R-R6) or a new one created
///   (`calc_private_command_list_size`, `create_command_list`,
///   `calc_deferred_context_handle_size(COMMANDLIST)`), while state-refresh queries still
///   answer the bindings (R-C1); every handle is closed (`close_local`) and its hold passes to
///   the list; the recording becomes the list's; the context is renewed
///   (`recycle_create_deferred_context`). The list is *live* (`ListState`), its stamp 0.
/// - **Executed n times and stamped**, on the immediate context's thread
///   (`execute_command_list`, then each operation through `execute`, then `ClearState`,
///   R-C3; a driver-built list is `execute_command_list` alone, the driver running what it
///   built): each execute stamps the list with the open buffer
///   (`ListStamp`) and references the objects it holds in that buffer.
/// - **Destroyed or recycle-destroyed** (the drop of its last owner, any thread, R-R4: its
///   `CommandList`, or the last outer list or recording that executes it): the holds are
///   released, and so are the owners it has of the lists it executes;
///   while its context lives and the device recycles, `recycle_destroy_command_list` (the
///   driver keeps the memory; *recycle-destroyed*) and the list goes to its context's inbox;
///   otherwise it is *retired*.
/// - **Waiting**, in the pool (the context's thread, at its next Finish): a list whose stamp has
///   not passed the list clock waits; nothing may write its memory.
/// - **Recycled** (the context's thread, at a Finish): `recycle_command_list`, the list is
///   *cached*, and a later Finish makes it live again (above); or **retired** (any thread):
///   its context is gone or recycling is off, it ends with `destroy_command_list` (or, cached,
///   with its context's `destroy_deferred_context`).
/// - **Freed**: the memory goes once the stamp passed the clock: at once, or from the device's
///   queue of retired lists after a later flush of the immediate context, or at device
///   destruction (the GPU is idle then).
///
/// A list holds every object it names, so an object the application destroys after recording
/// it stays usable by the list and is really destroyed after the list is (as D3D's references
/// keep it). The list's Map(DISCARD) data and update payloads live in its own arena and replay
/// the same every time. A list is executable only while the Rust value exists (R-R8); a list
/// of another device is refused.
///
/// Dropped on another thread: its memory goes back to its context, which recycles it at its
/// next Finish once the buffer that executed it was submitted (R-R4, R-R5):
///
/// ```
/// # #[cfg(feature = "soft")] {
/// use cmdlist::soft::null::{copy_of, null_device};
/// use cmdlist::DeviceConfig;
///
/// let (device, mut ic) = null_device(DeviceConfig::default())?;
/// let copy = copy_of(&device);
/// let mut dc = device.create_deferred_context()?;
/// dc.command(copy)?;
/// let list = dc.finish()?;
/// ic.execute_command_list(&list)?;
/// std::thread::spawn(move || drop(list)).join().unwrap();
/// ic.flush()?;
/// dc.command(copy)?;
/// let again = dc.finish()?;
/// assert_eq!(dc.stats().recycled, 1, "made from the dropped list's memory");
/// # drop(again);
/// # }
/// # Ok::<(), cmdlist::Error>(())
/// ```
pub struct CommandList<D: Driver, K: Kernel> {
    /// The application's owner of the list; outer lists that execute it own it too.
    list: SharedList<D, K>,
}

/// What a command list holds, for diagnostics and memory accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListStats {
    /// Recorded operations.
    pub operations: usize,
    /// Objects the list holds.
    pub objects: usize,
    /// Payload bytes recorded.
    pub payload_bytes: usize,
    /// Operations an execute of the list replays, those of the lists it executes included
    /// (at most [`crate::DeviceConfig::replay_limit`]).
    pub replayed_operations: u64,
    /// Bytes of memory the list keeps (capacities, arena chunks, handle memory).
    pub retained_bytes: usize,
}

/// The list's counters, not the driver's memory.
impl<D: Driver, K: Kernel> core::fmt::Debug for CommandList<D, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CommandList")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// The application's drop of a list (DestroyCommandList, free-threaded) is a call of the
/// device's in its capture (feature `capture`).
#[cfg(feature = "capture")]
impl<D: Driver, K: Kernel> Drop for CommandList<D, K> {
    fn drop(&mut self) {
        let data = self.data();
        if let (Some(&id), Some(sink)) = (data.capture_id.get(), data.device.capture_sink()) {
            let call = crate::capture::Call::DropList(id);
            sink.device_call(call, crate::capture::Outcome::Ok);
        }
    }
}

impl<D: Driver, K: Kernel> CommandList<D, K> {
    /// The capture's record of an execute of this list (feature `capture`): by its name, or,
    /// for a list of no capture's (another device's, which the execute refuses), as no list.
    #[cfg(feature = "capture")]
    pub(crate) fn capture_execute_call<C>(
        &self,
        restoring: bool,
    ) -> crate::capture::Call<'static, C> {
        let none = crate::capture::ListId {
            stream: crate::capture::DEVICE_STREAM,
            finish: 0,
        };
        let list = self.data().capture_id.get().copied().unwrap_or(none);
        crate::capture::Call::Execute { list, restoring }
    }

    pub(crate) fn new(node: Box<ListNode<D, K>>) -> Self {
        CommandList {
            list: Shared::new(node),
        }
    }

    pub(crate) fn data(&self) -> &ListData<D, K> {
        self.list.get()
    }

    /// Another owner of the list, for an outer list that executes it.
    pub(crate) fn share(&self) -> SharedList<D, K> {
        self.list.share()
    }

    /// What the list holds.
    pub fn stats(&self) -> ListStats {
        let b = &self.data().body;
        ListStats {
            operations: b.rec.operations,
            objects: b.held.len(),
            payload_bytes: b.rec.payload_bytes,
            replayed_operations: b.rec.replayed_ops(),
            retained_bytes: b.retained_bytes(),
        }
    }

    /// The device the list belongs to.
    pub fn device(&self) -> &Device<D, K> {
        &self.data().device
    }
}

/// Pushes a recycle-destroyed list onto its context's list of destroyed ones; if the context
/// is gone, the list ends for good here.
#[inline]
fn send_home<D: Driver, K: Kernel>(node: Box<ListNode<D, K>>) {
    let home: *const DropStack<ListData<D, K>> = &node.value.home.destroyed;
    // SAFETY: the node keeps its home alive until the node is dropped; `push` reads the
    // stack only until its CAS publishes the node (after which the context may take, recycle
    // or free it at once), and a refused node comes back to this thread, which owns it.
    if let Err(back) = unsafe { &*home }.push(node) {
        // The context went away meanwhile: nobody will recycle it.
        release(back);
    }
}
