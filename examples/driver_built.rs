//! # driver_built: a driver that builds its own command lists
//!
//! [`ListMode::DriverBuilt`]: the driver answers `true` to [`Driver::builds_command_lists`],
//! so every call recorded on a deferred context reaches it on the recording thread
//! ([`Driver::record_deferred`], [`Driver::map_discard_deferred`]), where it validates and
//! encodes into a buffer of its own. Finish hands that buffer to the list: the list's private
//! memory, whose size is fixed before anything is recorded (R-R2), holds only the buffer's
//! slot number. Executing a list is one [`Driver::execute_command_list`] on the immediate
//! context's thread, whatever its length; none of its operations reaches
//! [`Driver::execute`].
//!
//! The buffers' lifecycle is the part a driver must get right (R-R4, R-R5, R-R6): a slot is
//! reused from [`Driver::recycle_command_list`] on (the list clock has passed the last buffer
//! that executed the list), freed in [`Driver::destroy_command_list`] or, for the lists in a
//! context's cache, in [`Driver::destroy_deferred_context`], and never touched in
//! [`Driver::recycle_destroy_command_list`], which may run while a buffer still reads it.
//! The packets name objects by handle and resolve them at execute (R-X5 may move
//! allocations between Finish and the execute).
//!
//! The "GPU" is the CPU: the kernel keeps each allocation's bytes, and the immediate context
//! applies the packets to them at once. The run records two lists per context on two threads
//! per frame (a fill, UpdateSubresource and Map(DISCARD) into two resources), executes them
//! on the immediate context and checks the resources' bytes, for three frames: the later
//! frames' lists come from recycled memory, and at device destruction every slot, cached or
//! not, has been given back.
//!
//! Run it with `cargo run --example driver_built` (it exits non-zero when a check fails);
//! `cargo test --example driver_built` runs the same checks as a test.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use cmdlist::handle::Resource;
use cmdlist::{
    AllocationDesc, AllocationHandle, AnyHandle, Command, ContextId, DeferredCall, DeferredId,
    Device, DeviceConfig, Driver, Error, Handle, HandleSize, HandleSizeTable, HandleType, Kernel,
    ListMemory, ListMode, LocalHandles, ObjectDesc, Op, Resolver, ResourceDesc, Result, StateView,
    Submission, ThreadingCaps, Usage,
};

/// The driver's one command: fill a resource with a byte.
#[derive(Clone, Copy, Debug)]
struct Fill {
    dst: Handle<Resource>,
    value: u8,
}

impl Command for Fill {
    fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle)) {
        visit(self.dst.any());
    }
}

/// What a list's buffer holds: objects by handle, resolved at execute.
enum Packet {
    Fill {
        dst: Handle<Resource>,
        value: u8,
    },
    Write {
        dst: Handle<Resource>,
        offset: usize,
        data: Vec<u8>,
    },
}

/// The kernel's memory, shared by the kernel (which allocates it) and the driver (which
/// writes it on the immediate context).
#[derive(Default)]
struct Memory {
    bytes: Mutex<HashMap<AllocationHandle, Vec<u8>>>,
}

impl Memory {
    fn read(&self, allocation: AllocationHandle) -> Option<Vec<u8>> {
        self.bytes.lock().ok()?.get(&allocation).cloned()
    }
}

/// The finished lists' buffers, by slot; a list's private memory holds its slot.
#[derive(Default)]
struct Buffers {
    slots: Vec<Vec<Packet>>,
    free: Vec<u32>,
}

/// A deferred context's state: the list being built, the memory its open Map handed out,
/// and the slots of the lists in its cache (R-R5).
#[derive(Default)]
struct Building {
    packets: Vec<Packet>,
    staging: Vec<u8>,
    cached: Vec<u32>,
}

struct BuildingDriver {
    sizes: HandleSizeTable,
    memory: Arc<Memory>,
    buffers: Mutex<Buffers>,
    /// Lists made from recycled memory (R-R6), and lists executed on the immediate context.
    recycled: AtomicUsize,
    executed: AtomicUsize,
}

/// Context-local handles hold nothing this driver needs (8 bytes, for every type: R-H4).
const LOCAL_SIZE: usize = 8;

fn slot_of(private: &[u8]) -> Result<usize> {
    let bytes = private.get(..4).ok_or(Error::InvalidArg)?;
    let slot = u32::from_le_bytes(bytes.try_into().map_err(|_| Error::InvalidArg)?);
    usize::try_from(slot).map_err(|_| Error::InvalidArg)
}

impl BuildingDriver {
    fn new(memory: Arc<Memory>) -> Self {
        let sizes = HandleSizeTable::new(HandleType::ALL.iter().map(|&ty| HandleSize {
            ty,
            size: LOCAL_SIZE,
        }))
        .expect("one size per type");
        BuildingDriver {
            sizes,
            memory,
            buffers: Mutex::default(),
            recycled: AtomicUsize::new(0),
            executed: AtomicUsize::new(0),
        }
    }

    fn buffers(&self) -> std::sync::MutexGuard<'_, Buffers> {
        self.buffers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Finish: the context's packets move into slot `reuse` (a recycled list's) or a free
    /// one, whose number goes into the list's private memory.
    fn store(&self, dc: &mut Building, private: &mut [u8], reuse: Option<usize>) -> Result<()> {
        let mut buffers = self.buffers();
        let slot = match reuse.or_else(|| buffers.free.pop().map(|s| s as usize)) {
            Some(slot) => slot,
            None => {
                buffers.slots.push(Vec::new());
                buffers.slots.len() - 1
            }
        };
        let number = u32::try_from(slot).map_err(|_| Error::OutOfMemory)?;
        let buffer = buffers.slots.get_mut(slot).ok_or(Error::InvalidArg)?;
        buffer.clear();
        std::mem::swap(buffer, &mut dc.packets);
        private[..4].copy_from_slice(&number.to_le_bytes());
        Ok(())
    }

    /// Applies one packet on the immediate context, its object resolved now.
    fn apply(&self, objects: &Resolver<'_, Self>, packet: &Packet) -> Result<()> {
        let (dst, offset, data): (_, usize, &[u8]) = match packet {
            Packet::Fill { dst, value } => (*dst, 0, &[*value]),
            Packet::Write { dst, offset, data } => (*dst, *offset, data),
        };
        let allocation = objects.get(dst)?.allocation().ok_or(Error::InvalidArg)?;
        let mut memory = self.memory.bytes.lock().map_err(|_| Error::DeviceRemoved)?;
        let bytes = memory.get_mut(&allocation).ok_or(Error::InvalidArg)?;
        match packet {
            Packet::Fill { .. } => bytes.fill(data[0]),
            Packet::Write { .. } => {
                let end = offset.checked_add(data.len()).ok_or(Error::InvalidArg)?;
                bytes
                    .get_mut(offset..end)
                    .ok_or(Error::InvalidArg)?
                    .copy_from_slice(data);
            }
        }
        Ok(())
    }
}

impl Driver for BuildingDriver {
    type Object = ();
    type IcData = ();
    type Immediate = ();
    type Command = Fill;
    type Deferred = Building;

    fn threading_caps(&self) -> ThreadingCaps {
        ThreadingCaps::FREETHREADED
            | ThreadingCaps::COMMANDLISTS
            | ThreadingCaps::COMMANDLISTS_BUILD_2
    }

    fn builds_command_lists(&self) -> bool {
        true
    }

    fn check_deferred_context_handle_sizes(&self, out: Option<&mut [HandleSize]>) -> usize {
        self.sizes.answer_poll(out)
    }

    fn calc_private_size(&self, desc: &ObjectDesc<'_>) -> usize {
        match desc {
            ObjectDesc::Resource(r) => usize::try_from(r.byte_size).unwrap_or(usize::MAX),
            _ => 0,
        }
    }

    fn calc_deferred_context_handle_size(&self, _ty: HandleType, _: Option<&()>) -> usize {
        LOCAL_SIZE
    }

    fn calc_private_command_list_size(&self) -> usize {
        4 // the slot number
    }

    fn create_object(
        &self,
        _desc: &ObjectDesc<'_>,
        _memory: Option<AllocationHandle>,
        _dependency: Option<&()>,
    ) -> Result<((), ())> {
        Ok(((), ()))
    }

    fn destroy_object(&self, _ty: HandleType, _object: &(), _ic: &mut ()) {}

    fn create_immediate(&self) -> Result<()> {
        Ok(())
    }

    fn execute(&self, _imm: &mut (), objects: &Resolver<'_, Self>, op: Op<'_, Self>) -> Result<()> {
        // The immediate context's own calls; a list's never come here in this mode.
        match op {
            Op::Command(fill) => self.apply(
                objects,
                &Packet::Fill {
                    dst: fill.dst,
                    value: fill.value,
                },
            ),
            _ => Ok(()),
        }
    }

    fn flush(&self, _imm: &mut ()) {}

    fn execute_command_list(
        &self,
        _imm: &mut (),
        list: &[u8],
        objects: &Resolver<'_, Self>,
    ) -> Result<()> {
        // The whole execute: run the buffer, from the clear state, leaving the clear state
        // (R-C3; this driver keeps no bindings).
        self.executed.fetch_add(1, Ordering::Relaxed);
        let slot = slot_of(list)?;
        let buffers = self.buffers();
        let packets = buffers.slots.get(slot).ok_or(Error::InvalidArg)?;
        packets.iter().try_for_each(|p| self.apply(objects, p))
    }

    fn record_deferred(
        &self,
        dc: &mut Building,
        call: DeferredCall<'_, Self>,
        _locals: &mut LocalHandles<'_, Self>,
    ) -> Result<()> {
        // On the recording thread: validate and encode.
        let packet = match call {
            DeferredCall::Command(fill) => Packet::Fill {
                dst: fill.dst,
                value: fill.value,
            },
            DeferredCall::Update {
                resource,
                offset,
                data,
            } => Packet::Write {
                dst: resource,
                offset: usize::try_from(offset).map_err(|_| Error::InvalidArg)?,
                data: data.to_vec(),
            },
            // The Map's bytes are the driver's (`map_discard_deferred`); take them now.
            DeferredCall::Unmap { resource, .. } => Packet::Write {
                dst: resource,
                offset: 0,
                data: std::mem::take(&mut dc.staging),
            },
            _ => return Ok(()),
        };
        dc.packets.try_reserve(1).map_err(|_| Error::OutOfMemory)?;
        dc.packets.push(packet);
        Ok(())
    }

    fn map_discard_deferred<'a>(
        &self,
        dc: &'a mut Building,
        _resource: Handle<Resource>,
        len: usize,
        _locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        dc.staging.clear();
        dc.staging
            .try_reserve(len)
            .map_err(|_| Error::OutOfMemory)?;
        dc.staging.resize(len, 0);
        Ok(&mut dc.staging)
    }

    fn create_deferred_context(&self, _id: DeferredId) -> Result<Building> {
        Ok(Building::default())
    }

    fn destroy_deferred_context(&self, dc: Building) {
        // The lists in the context's cache end with it.
        let mut buffers = self.buffers();
        for slot in dc.cached {
            buffers.slots[slot as usize] = Vec::new();
            buffers.free.push(slot);
        }
    }

    fn open_local(
        &self,
        _dc: &mut Building,
        _ty: HandleType,
        _object: &(),
        _dependency: Option<&[u8]>,
        _local: &mut [u8],
    ) -> Result<()> {
        Ok(())
    }

    fn close_local(
        &self,
        _dc: &mut Building,
        _ty: HandleType,
        _object: &(),
        _local: &mut [u8],
        _state: StateView<'_>,
    ) {
    }

    fn create_command_list(
        &self,
        dc: &mut Building,
        private: &mut [u8],
        _state: StateView<'_>,
    ) -> Result<()> {
        self.store(dc, private, None)
    }

    fn recycle_command_list(&self, dc: &mut Building, list: ListMemory<'_>) {
        // The list clock has passed its last execute: its buffer may be reused from here.
        if let Ok(slot) = slot_of(list.private) {
            self.buffers().slots[slot].clear();
            dc.cached.push(slot as u32);
        }
    }

    fn recycle_create_command_list(
        &self,
        dc: &mut Building,
        list: ListMemory<'_>,
        _state: StateView<'_>,
    ) -> Result<()> {
        let slot = slot_of(list.private)?;
        dc.cached.retain(|&s| s as usize != slot);
        self.recycled.fetch_add(1, Ordering::Relaxed);
        self.store(dc, list.private, Some(slot))
    }

    // `recycle_destroy_command_list` keeps its default (nothing): a buffer that executed the
    // list may not even be submitted yet (R-R4).

    fn destroy_command_list(&self, list: ListMemory<'_>) {
        if let Ok(slot) = slot_of(list.private) {
            let mut buffers = self.buffers();
            buffers.slots[slot] = Vec::new();
            buffers.free.push(slot as u32);
        }
    }

    fn abandon_command_list(&self, dc: &mut Building) {
        dc.packets.clear();
        dc.staging.clear();
    }
}

/// A kernel whose GPU completes each submission at once; allocations are zeroed bytes.
struct CpuKernel {
    memory: Arc<Memory>,
    next_allocation: AtomicU64,
    completed: AtomicU64,
    errors: AtomicUsize,
}

impl Kernel for CpuKernel {
    fn allocate(&self, desc: &AllocationDesc) -> Result<AllocationHandle> {
        let size = usize::try_from(desc.size).map_err(|_| Error::OutOfMemory)?;
        let id = self.next_allocation.fetch_add(1, Ordering::Relaxed) + 1;
        let allocation = AllocationHandle(NonZeroU64::new(id).ok_or(Error::OutOfMemory)?);
        let mut bytes = Vec::new();
        bytes.try_reserve(size).map_err(|_| Error::OutOfMemory)?;
        bytes.resize(size, 0);
        let mut memory = self.memory.bytes.lock().map_err(|_| Error::OutOfMemory)?;
        memory.insert(allocation, bytes);
        Ok(allocation)
    }

    fn deallocate(&self, allocation: AllocationHandle) {
        if let Ok(mut memory) = self.memory.bytes.lock() {
            memory.remove(&allocation);
        }
    }

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
        eprintln!("error on {context:?}: {error:?}");
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    fn perform_amortized_processing(&self, _context: ContextId) {}
}

const FRAMES: u8 = 3;
const SIZE: usize = 16;

/// The run of the module docs; panics when a resource holds other bytes than expected.
fn run() -> Result<()> {
    let memory = Arc::new(Memory::default());
    let kernel = CpuKernel {
        memory: Arc::clone(&memory),
        next_allocation: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        errors: AtomicUsize::new(0),
    };
    let driver = BuildingDriver::new(Arc::clone(&memory));
    let (device, mut ic) = Device::new(driver, kernel, DeviceConfig::default())?;
    assert_eq!(device.list_mode(), ListMode::DriverBuilt);

    let desc = ResourceDesc {
        byte_size: SIZE as u64,
        usage: Usage::Dynamic,
        ..Default::default()
    };
    let targets = [device.create_resource(desc)?, device.create_resource(desc)?];
    let mut contexts = [
        device.create_deferred_context()?,
        device.create_deferred_context()?,
    ];

    for frame in 0..FRAMES {
        // Each context records on its own thread: a fill, an update of bytes 4..8, and a
        // Map(DISCARD) whose new contents replace everything when `frame` is odd.
        let lists = thread::scope(|s| {
            let recorders: Vec<_> = contexts
                .iter_mut()
                .zip(targets)
                .zip([10u8, 20])
                .map(|((dc, dst), base)| {
                    s.spawn(move || -> Result<_> {
                        dc.command(Fill {
                            dst,
                            value: base + frame,
                        })?;
                        dc.update(dst, 4, &[frame; 4])?;
                        let first = dc.finish()?;
                        if frame % 2 == 1 {
                            dc.map_discard(dst)?.fill(base + 100);
                            dc.unmap(dst)?;
                        } else {
                            dc.update(dst, 8, &[frame + 50; 4])?;
                        }
                        Ok([first, dc.finish()?])
                    })
                })
                .collect();
            recorders
                .into_iter()
                .map(|r| r.join().expect("a recording thread"))
                .collect::<Result<Vec<_>>>()
        })?;
        let lists: Vec<_> = lists.into_iter().flatten().collect();

        // The immediate context executes each list whole, lets them go, flushes.
        for list in &lists {
            ic.execute_command_list(list)?;
        }
        drop(lists);
        ic.flush()?;

        for (dst, base) in targets.into_iter().zip([10u8, 20]) {
            let allocation = device.object(dst)?.allocation().ok_or(Error::InvalidArg)?;
            let bytes = memory.read(allocation).ok_or(Error::InvalidArg)?;
            let expected: Vec<u8> = match frame % 2 {
                1 => vec![base + 100; SIZE],
                _ => (0..SIZE)
                    .map(|i| match i {
                        4..8 => frame,
                        8..12 => frame + 50,
                        _ => base + frame,
                    })
                    .collect(),
            };
            assert_eq!(bytes, expected, "frame {frame}: the bytes of {dst:?}");
        }
    }

    let driver = device.driver();
    let lists = usize::from(FRAMES) * 2 * contexts.len();
    assert_eq!(driver.executed.load(Ordering::Relaxed), lists);
    // Every frame after the first made its lists from the memory of the previous frame's.
    let recycled = driver.recycled.load(Ordering::Relaxed);
    assert_eq!(
        recycled,
        lists - 2 * contexts.len(),
        "lists from recycled memory"
    );

    // One more Finish per context takes both of the last frame's lists into its cache and
    // makes its list from one: the other stays cached until the context ends.
    for dc in &mut contexts {
        drop(dc.finish()?);
    }

    for dst in targets {
        device.destroy(dst)?;
    }
    drop(contexts);
    ic.destroy_device()?;
    // Every buffer given back, every allocation freed, no error reported.
    let buffers = driver.buffers();
    assert!(
        buffers.slots.iter().all(Vec::is_empty),
        "a list's buffer was kept"
    );
    assert_eq!(
        buffers.free.len(),
        buffers.slots.len(),
        "a slot was not freed"
    );
    assert!(
        memory.bytes.lock().expect("memory").is_empty(),
        "an allocation leaked"
    );
    assert_eq!(device.kernel().errors.load(Ordering::Relaxed), 0);
    println!(
        "driver_built: {lists} lists executed whole, {recycled} from recycled memory, {} slots",
        buffers.slots.len()
    );
    Ok(())
}

fn main() -> Result<()> {
    run()
}

#[test]
fn lists_built_by_the_driver_execute_whole() {
    run().expect("the run");
}
