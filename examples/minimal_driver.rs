//! # minimal_driver: the smallest driver and kernel, outside the crate
//!
//! What an embedder starts from: a [`Driver`] and a [`Kernel`] written against the public
//! API alone (`cmdlist::...` paths, none of the `soft` feature's types), each required hook
//! in its simplest correct form and every provided hook left at its default but one:
//! `record_deferred`, where the driver hears each recorded call with its context-local
//! handles. The engine replays the lists ([`cmdlist::ListMode::Replayed`]): a deferred
//! context's calls come back to [`Driver::execute`] on the immediate context's thread when a
//! list is executed.
//!
//! The driver keeps one thing a real one would not: a log of the hooks it hears, with the
//! thread each ran on, so that the run below can check the protocol from the driver's side.
//! The run creates a device, hands a deferred context to another thread, records a
//! CopyResource, an UpdateSubresource and a bind there, finishes the list (R-R7), executes
//! it on the immediate context (R-C3), flushes (R-D2) and tears everything down (R-D3). It
//! asserts that each hook came in the documented order on the documented thread, and that
//! the context-local handles the driver wrote at `open_local` (R-H1, R-H5) are the ones it
//! reads back while recording.
//!
//! Run it with `cargo run --example minimal_driver` (it exits non-zero when a check fails);
//! `cargo test --example minimal_driver` runs the same checks as a test.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread::{self, ThreadId};

use cmdlist::handle::Resource;
use cmdlist::{
    AllocationDesc, AllocationHandle, AnyHandle, BindClass, BindPoint, Command, ContextId,
    DeferredCall, DeferredId, Device, DeviceConfig, Driver, Error, Handle, HandleSize,
    HandleSizeTable, HandleType, Kernel, ListMemory, LocalHandles, ObjectDesc, Op, Resolver,
    ResourceDesc, Result, StateView, Submission, ThreadingCaps,
};

/// The driver's one command, CopyResource.
#[derive(Clone, Copy, Debug)]
struct Copy {
    dst: Handle<Resource>,
    src: Handle<Resource>,
}

impl Command for Copy {
    fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle)) {
        // Every object the command names (R-H3); what it reads through bindings need not be.
        visit(self.src.any());
        visit(self.dst.any());
    }
}

/// An object's shared, read-only data: a number the driver gives it.
struct Object {
    id: u64,
}

/// Every context-local handle holds its object's number: 8 bytes, for every type (R-H4).
const LOCAL_SIZE: usize = 8;

/// The driver: its handle-size table, its object numbers, and the log of what it heard.
struct MinimalDriver {
    sizes: HandleSizeTable,
    next_id: AtomicU64,
    heard: Mutex<Vec<(ThreadId, String)>>,
}

impl MinimalDriver {
    fn new() -> Self {
        let sizes = HandleSizeTable::new(HandleType::ALL.iter().map(|&ty| HandleSize {
            ty,
            size: LOCAL_SIZE,
        }))
        .expect("one size per type");
        MinimalDriver {
            sizes,
            next_id: AtomicU64::new(1),
            heard: Mutex::new(Vec::new()),
        }
    }

    fn hear(&self, hook: String) {
        let mut heard = self.heard.lock().unwrap_or_else(|e| e.into_inner());
        heard.push((thread::current().id(), hook));
    }

    /// The object number a context-local handle holds (0 for a handle not open).
    fn local_id(locals: &mut LocalHandles<'_, Self>, handle: AnyHandle) -> u64 {
        locals.get(handle).map_or(0, |local| read_id(local.local))
    }
}

fn read_id(bytes: &[u8]) -> u64 {
    bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

impl Driver for MinimalDriver {
    type Object = Object;
    type IcData = ();
    /// The immediate context's command buffer: here, the copies it performed.
    type Immediate = Vec<(u64, u64)>;
    type Command = Copy;
    type Deferred = ();

    fn threading_caps(&self) -> ThreadingCaps {
        // Command lists without the recycle hooks (COMMANDLISTS_BUILD_2): Finish renews the
        // context with `destroy_deferred_context` and `create_deferred_context` (R-R7).
        ThreadingCaps::FREETHREADED | ThreadingCaps::COMMANDLISTS
    }

    fn check_deferred_context_handle_sizes(&self, out: Option<&mut [HandleSize]>) -> usize {
        self.sizes.answer_poll(out)
    }

    fn calc_private_size(&self, desc: &ObjectDesc<'_>) -> usize {
        // Resources get kernel memory; the engine allocates and frees it (R-F2, R-D1).
        match desc {
            ObjectDesc::Resource(r) => usize::try_from(r.byte_size).unwrap_or(usize::MAX),
            _ => 0,
        }
    }

    fn calc_deferred_context_handle_size(&self, _ty: HandleType, _: Option<&Object>) -> usize {
        LOCAL_SIZE
    }

    fn calc_private_command_list_size(&self) -> usize {
        8
    }

    fn create_object(
        &self,
        _desc: &ObjectDesc<'_>,
        _memory: Option<AllocationHandle>,
        _dependency: Option<&Object>,
    ) -> Result<(Object, ())> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        Ok((Object { id }, ()))
    }

    fn destroy_object(&self, ty: HandleType, object: &Object, _ic: &mut ()) {
        self.hear(format!("destroy_object {ty:?} {}", object.id));
    }

    fn create_immediate(&self) -> Result<Vec<(u64, u64)>> {
        Ok(Vec::new())
    }

    fn execute(
        &self,
        imm: &mut Vec<(u64, u64)>,
        objects: &Resolver<'_, Self>,
        op: Op<'_, Self>,
    ) -> Result<()> {
        match op {
            Op::Command(copy) => {
                let src = objects.get(copy.src)?.object().id;
                let dst = objects.get(copy.dst)?.object().id;
                imm.push((src, dst));
                self.hear(format!("execute copy {src} -> {dst}"));
            }
            Op::Update { resource, .. } => {
                self.hear(format!("execute update {}", resource.object().id));
            }
            Op::Bind { object, .. } => {
                let id = object.map_or(0, |o| o.object().id);
                self.hear(format!("execute bind {id}"));
            }
            Op::ClearState => self.hear("execute clear_state".into()),
            // `Op` is non-exhaustive: an operation this driver does not know it does not do.
            _ => {}
        }
        Ok(())
    }

    fn flush(&self, _imm: &mut Vec<(u64, u64)>) {
        self.hear("flush".into());
    }

    fn create_deferred_context(&self, id: DeferredId) -> Result<()> {
        self.hear(format!("create_deferred_context {id}"));
        Ok(())
    }

    fn destroy_deferred_context(&self, _dc: ()) {
        self.hear("destroy_deferred_context".into());
    }

    fn open_local(
        &self,
        _dc: &mut (),
        ty: HandleType,
        object: &Object,
        _dependency: Option<&[u8]>,
        local: &mut [u8],
    ) -> Result<()> {
        // The context-local handle's memory is the driver's to lay out (R-H4, R-H5).
        local[..8].copy_from_slice(&object.id.to_le_bytes());
        self.hear(format!("open_local {ty:?} {}", object.id));
        Ok(())
    }

    fn close_local(
        &self,
        _dc: &mut (),
        ty: HandleType,
        object: &Object,
        local: &mut [u8],
        _state: StateView<'_>,
    ) {
        self.hear(format!("close_local {ty:?} {}", read_id(local)));
        assert_eq!(read_id(local), object.id, "a context-local handle changed");
    }

    fn record_deferred(
        &self,
        _dc: &mut (),
        call: DeferredCall<'_, Self>,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<()> {
        // The recording thread's view of each call: objects through their context-local
        // handles, which `open_local` filled (R-H1).
        match call {
            DeferredCall::Command(copy) => {
                let src = Self::local_id(locals, copy.src.any());
                let dst = Self::local_id(locals, copy.dst.any());
                self.hear(format!("record copy {src} -> {dst}"));
            }
            DeferredCall::Update { resource, .. } => {
                let id = Self::local_id(locals, resource.any());
                self.hear(format!("record update {id}"));
            }
            DeferredCall::Bind { object, .. } => {
                let id = object.map_or(0, |o| Self::local_id(locals, o));
                self.hear(format!("record bind {id}"));
            }
            _ => {}
        }
        Ok(())
    }

    fn create_command_list(
        &self,
        _dc: &mut (),
        _private: &mut [u8],
        _state: StateView<'_>,
    ) -> Result<()> {
        self.hear("create_command_list".into());
        Ok(())
    }

    fn destroy_command_list(&self, _list: ListMemory<'_>) {
        self.hear("destroy_command_list".into());
    }

    fn abandon_command_list(&self, _dc: &mut ()) {
        self.hear("abandon_command_list".into());
    }
}

/// The kernel: allocation handles from a counter, a GPU that completes each submission at
/// once, and the errors the engine reported (R-E2).
#[derive(Default)]
struct MinimalKernel {
    next_allocation: AtomicU64,
    completed: AtomicU64,
    errors: Mutex<Vec<(ContextId, Error)>>,
}

impl Kernel for MinimalKernel {
    fn allocate(&self, _desc: &AllocationDesc) -> Result<AllocationHandle> {
        let id = self.next_allocation.fetch_add(1, Ordering::Relaxed) + 1;
        NonZeroU64::new(id)
            .map(AllocationHandle)
            .ok_or(Error::OutOfMemory)
    }

    fn deallocate(&self, _allocation: AllocationHandle) {}

    fn submit(&self, submission: &Submission<'_>) -> Result<()> {
        self.completed.store(submission.fence, Ordering::Release);
        Ok(())
    }

    fn completed_fence(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }

    fn wait_for_fence(&self, _fence: u64) -> Result<()> {
        Ok(())
    }

    fn set_error(&self, context: ContextId, error: Error) {
        let mut errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        errors.push((context, error));
    }

    fn perform_amortized_processing(&self, _context: ContextId) {}
}

/// The short run of the module docs; panics when the driver heard something else.
fn run() -> Result<()> {
    // CreateDevice, on the thread that drives the immediate context.
    let config = DeviceConfig::default();
    let (device, mut ic) = Device::new(MinimalDriver::new(), MinimalKernel::default(), config)?;
    let desc = ResourceDesc {
        byte_size: 16,
        ..Default::default()
    };
    let src = device.create_resource(desc)?;
    let dst = device.create_resource(desc)?;
    let (src_id, dst_id) = (device.object(src)?.id, device.object(dst)?.id);

    // CreateDeferredContext (any thread), then the context records on a thread of its own.
    let mut dc = device.create_deferred_context()?;
    let id = dc.id();
    let recorder = thread::spawn(move || -> Result<_> {
        dc.command(Copy { dst, src })?;
        dc.update(dst, 0, &[1, 2, 3, 4])?;
        dc.bind(BindPoint::new(BindClass::VertexBuffer, 0), Some(src.any()))?;
        let list = dc.finish()?; // FinishCommandList (R-R7)
        Ok((thread::current().id(), dc, list))
    });
    let (dc_thread, dc, list) = recorder.join().expect("the recording thread")?;

    // The immediate context's thread: execute, let the list go (R-R4), flush (R-D2).
    ic.execute_command_list(&list)?;
    drop(list);
    ic.flush()?;
    assert_eq!(
        ic.driver_state(),
        &[(src_id, dst_id)][..],
        "one copy performed"
    );

    // Teardown: objects (free-threaded), the deferred context, then the device (R-D3).
    device.destroy(src)?;
    device.destroy(dst)?;
    drop(dc);
    ic.destroy_device()?;

    let errors = device.kernel().errors.lock().expect("errors").clone();
    assert!(errors.is_empty(), "the engine reported {errors:?}");

    let ic_thread = thread::current().id();
    let heard = device.driver().heard.lock().expect("log").clone();
    for (thread, hook) in &heard {
        println!("{} {hook}", if *thread == ic_thread { "IC" } else { "DC" });
    }
    let on = |thread: ThreadId| -> Vec<&str> {
        heard
            .iter()
            .filter(|(t, _)| *t == thread)
            .map(|(_, hook)| hook.as_str())
            .collect()
    };
    // The recording thread: the first use of each object opens its context-local handle,
    // dependencies first (R-H1, R-H3); each call reads them back; Finish creates the list
    // and closes the handles (R-R7, R-C1), then renews the context, which keeps its number.
    let (s, d) = (src_id, dst_id);
    let expected_dc = [
        format!("open_local Resource {s}"),
        format!("open_local Resource {d}"),
        format!("record copy {s} -> {d}"),
        format!("record update {d}"),
        format!("record bind {s}"),
        "create_command_list".to_string(),
        format!("close_local Resource {d}"),
        format!("close_local Resource {s}"),
        "destroy_deferred_context".to_string(),
        format!("create_deferred_context {id}"),
    ];
    assert_eq!(on(dc_thread), expected_dc, "the recording thread's hooks");
    // The immediate context's thread: the context's creation (its number: the same as
    // `DeferredContext::id`), the replay ended by
    // clear-state (R-C3), the flush, the deferred destructions (R-D1, R-D3).
    let expected_ic = [
        format!("create_deferred_context {id}"),
        format!("execute copy {s} -> {d}"),
        format!("execute update {d}"),
        format!("execute bind {s}"),
        "execute clear_state".to_string(),
        "flush".to_string(),
        "destroy_command_list".to_string(),
        "destroy_deferred_context".to_string(),
    ];
    let mut on_ic = on(ic_thread);
    // Last, DestroyDevice destroys both resources (in no order the protocol fixes).
    let mut destroyed = on_ic.split_off(expected_ic.len().min(on_ic.len()));
    destroyed.sort_unstable();
    assert_eq!(on_ic, expected_ic, "the immediate context's hooks");
    let expected_destroyed = [
        format!("destroy_object Resource {s}"),
        format!("destroy_object Resource {d}"),
    ];
    assert_eq!(destroyed, expected_destroyed, "the objects' destruction");
    assert_eq!(heard.len(), expected_dc.len() + expected_ic.len() + 2);
    Ok(())
}

fn main() -> Result<()> {
    run()?;
    println!("minimal_driver: every hook in order, on its thread");
    Ok(())
}

#[test]
fn the_driver_hears_the_protocol() {
    run().expect("the run");
}
