//! The driver under the shim: draws and vertex-buffer bindings encoded as words of a command
//! buffer, which the kernel hands to the runtime's render callback. The engine replays the
//! lists ([`cmdlist::ListMode::Replayed`]).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use cmdlist::{
    AllocationHandle, AnyHandle, BindClass, Command, DeferredCall, DeferredId, Driver, HandleSize,
    HandleSizeTable, HandleType, ListMemory, LocalHandles, ObjectDesc, Op, Resolver, Result,
    StateView, ThreadingCaps,
};

/// The command buffer's opcodes, each followed by its operands.
pub const DRAW: u32 = 1; // vertex count, start vertex
pub const BIND_VB: u32 = 2; // slot, resource id (0: none)
pub const WRITE: u32 = 3; // resource id, sum of the bytes written
pub const CLEAR: u32 = 4; // clear-state

/// The message of the driver's panic at a draw whose vertex range overflows (its bug, which
/// the run provokes on purpose).
pub const OVERFLOW_PANIC: &str = "the draw's vertex range fits in 32 bits";

/// Draw(VertexCount, StartVertexLocation): reads the bound vertex buffers, names no object.
#[derive(Clone, Copy, Debug)]
pub struct Draw {
    pub vertex_count: u32,
    pub start: u32,
}

impl Command for Draw {
    fn for_each_object(&self, _visit: &mut dyn FnMut(AnyHandle)) {
        // What a draw reads through the bindings the engine accounts for itself (R-D1).
    }
}

/// A resource: the number the command buffer names it by, and its size.
pub struct ResourceInfo {
    pub id: u32,
    pub size: u64,
}

/// The driver; `closed` is the buffer its flush closes, which the kernel submits.
pub struct ShimDriver {
    sizes: HandleSizeTable,
    next_id: AtomicU32,
    pub closed: Arc<Mutex<Vec<u32>>>,
}

const LOCAL_SIZE: usize = 8;

impl ShimDriver {
    pub fn new(closed: Arc<Mutex<Vec<u32>>>) -> Self {
        let sizes = HandleSizeTable::new(HandleType::ALL.iter().map(|&ty| HandleSize {
            ty,
            size: LOCAL_SIZE,
        }))
        .expect("one size per type");
        ShimDriver {
            sizes,
            next_id: AtomicU32::new(1),
            closed,
        }
    }
}

impl Driver for ShimDriver {
    type Object = ResourceInfo;
    type IcData = ();
    type Immediate = Vec<u32>;
    type Command = Draw;
    type Deferred = ();

    fn threading_caps(&self) -> ThreadingCaps {
        ThreadingCaps::FREETHREADED
            | ThreadingCaps::COMMANDLISTS
            | ThreadingCaps::COMMANDLISTS_BUILD_2
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

    fn calc_deferred_context_handle_size(&self, _: HandleType, _: Option<&ResourceInfo>) -> usize {
        LOCAL_SIZE
    }

    fn calc_private_command_list_size(&self) -> usize {
        8
    }

    fn create_object(
        &self,
        desc: &ObjectDesc<'_>,
        _memory: Option<AllocationHandle>,
        _dependency: Option<&ResourceInfo>,
    ) -> Result<(ResourceInfo, ())> {
        let size = match desc {
            ObjectDesc::Resource(r) => r.byte_size,
            _ => 0,
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        Ok((ResourceInfo { id, size }, ()))
    }

    fn destroy_object(&self, _ty: HandleType, _object: &ResourceInfo, _ic: &mut ()) {}

    fn create_immediate(&self) -> Result<Vec<u32>> {
        Ok(Vec::new())
    }

    fn execute(&self, imm: &mut Vec<u32>, _: &Resolver<'_, Self>, op: Op<'_, Self>) -> Result<()> {
        match op {
            Op::Command(draw) => imm.extend([DRAW, draw.vertex_count, draw.start]),
            Op::Bind { point, object } if point.class == BindClass::VertexBuffer => {
                let id = object.map_or(0, |o| o.object().id);
                imm.extend([BIND_VB, u32::from(point.slot), id]);
            }
            Op::WriteDiscard { resource, data } => {
                let sum = data.iter().map(|&b| u32::from(b)).sum();
                imm.extend([WRITE, resource.object().id, sum]);
            }
            Op::ClearState => imm.push(CLEAR),
            _ => {}
        }
        Ok(())
    }

    fn flush(&self, imm: &mut Vec<u32>) {
        let mut closed = self.closed.lock().unwrap_or_else(|e| e.into_inner());
        closed.append(imm);
    }

    fn record_deferred(
        &self,
        _dc: &mut (),
        call: DeferredCall<'_, Self>,
        _locals: &mut LocalHandles<'_, Self>,
    ) -> Result<()> {
        if let DeferredCall::Command(draw) = call {
            // A driver bug: an input it forgot to validate panics here. The shim's boundary
            // turns the panic into the DDI's error path; the engine refuses the call.
            let end = draw.start.checked_add(draw.vertex_count);
            let _last_vertex = end.expect(OVERFLOW_PANIC);
        }
        Ok(())
    }

    fn create_deferred_context(&self, _id: DeferredId) -> Result<()> {
        Ok(())
    }

    fn destroy_deferred_context(&self, _dc: ()) {}

    fn open_local(
        &self,
        _dc: &mut (),
        _ty: HandleType,
        _object: &ResourceInfo,
        _dependency: Option<&[u8]>,
        _local: &mut [u8],
    ) -> Result<()> {
        Ok(())
    }

    fn close_local(
        &self,
        _dc: &mut (),
        _ty: HandleType,
        _object: &ResourceInfo,
        _local: &mut [u8],
        _state: StateView<'_>,
    ) {
    }

    fn create_command_list(&self, _: &mut (), _: &mut [u8], _: StateView<'_>) -> Result<()> {
        Ok(())
    }

    fn destroy_command_list(&self, _list: ListMemory<'_>) {}

    fn abandon_command_list(&self, _dc: &mut ()) {}
}
