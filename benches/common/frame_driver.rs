//! The bench driver of `benches/frame.rs`: a driver whose per-draw work costs about what a
//! real one's does, so that a frame shows where that work runs.
//!
//! A draw ([`Draw`]) names a constant buffer and a vertex buffer. Translating it means
//! validating both objects (their id and size, from the context-local block on a deferred
//! context, from the object on the immediate context) and writing a packet of
//! [`PACKET_WORDS`] words ([`encode_draw`]), about 300 ns on this machine (see
//! BENCHMARKS.md): 3DMark's API-overhead test puts runtime and driver together at about
//! 360 ns per DirectX 11 draw. The new contents of a Map(DISCARD) are copied into the
//! packet stream as they are.
//!
//! Where the engine replays lists ([`FrameDriver::replayed`]), that work runs in
//! [`Driver::execute`] on the immediate context's thread, for its own draws and for every
//! replayed one. Where the driver builds its lists ([`FrameDriver::driver_built`]), the
//! deferred context does it in [`Driver::record_deferred`] on its own thread, into a buffer
//! that Finish hands to the list; [`Driver::execute_command_list`] then chains that buffer
//! into the immediate context's stream: three words, whatever the list's length.

use std::sync::Mutex;

use cmdlist::handle::Resource;
use cmdlist::{
    AllocationHandle, AnyHandle, Command, DeferredCall, DeferredId, Driver, Error, Handle,
    HandleSize, HandleSizeTable, HandleType, ListMemory, LocalHandles, ObjectDesc, Op, Resolver,
    Result, StateView, ThreadingCaps,
};

/// Words of a draw's packet.
pub const PACKET_WORDS: usize = 32;
/// Mixing rounds per packet word: what sizes a draw's translation at about 300 ns.
pub const ROUNDS: usize = 9;
/// Bytes of the constant buffer each draw updates through Map(DISCARD).
pub const CONSTANTS: usize = 64;

/// The packet that chains a list's buffer into the immediate context's stream.
const CHAIN: u64 = u64::MAX;

/// A draw: the constant buffer and the vertex buffer it reads.
#[derive(Clone, Copy, Debug)]
pub struct Draw {
    /// The constant buffer, updated by a Map(DISCARD) before each draw.
    pub cb: Handle<Resource>,
    /// The vertex buffer.
    pub vb: Handle<Resource>,
}

impl Command for Draw {
    #[inline]
    fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle)) {
        visit(self.cb.any());
        visit(self.vb.any());
    }
}

/// An object: what validating a draw reads.
pub struct FrameObject {
    id: u64,
    size: u64,
}

/// The immediate context's command stream.
#[derive(Default)]
pub struct Stream {
    words: Vec<u64>,
}

/// A deferred context's list being built.
#[derive(Default)]
pub struct Building {
    words: Vec<u64>,
    /// The memory handed out by the open Map(DISCARD).
    staging: Vec<u8>,
}

/// Finished lists' buffers, indexed by what their private memory holds.
#[derive(Default)]
struct Buffers {
    slots: Vec<Vec<u64>>,
    free: Vec<u32>,
}

/// See the module docs.
pub struct FrameDriver {
    sizes: HandleSizeTable,
    builds: bool,
    next_id: std::sync::atomic::AtomicU64,
    buffers: Mutex<Buffers>,
}

/// The translation of one draw: validates the two objects' ids and sizes, then writes the
/// packet. Not inlined, so that every mode runs the same code.
#[inline(never)]
pub fn encode_draw(cb: (u64, u64), vb: (u64, u64), out: &mut Vec<u64>) -> Result<()> {
    if cb.0 == 0 || vb.0 == 0 || cb.1 < CONSTANTS as u64 || vb.1 == 0 {
        return Err(Error::InvalidArg);
    }
    let mut x = cb.0 ^ vb.0.rotate_left(29) ^ cb.1.rotate_left(7) ^ vb.1;
    for _ in 0..PACKET_WORDS {
        for _ in 0..ROUNDS {
            x = (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        }
        out.push(x);
    }
    Ok(())
}

/// Appends `bytes` to the stream as words.
fn copy_in(bytes: &[u8], out: &mut Vec<u64>) {
    out.extend(
        bytes
            .chunks(8)
            .map(|c| c.iter().rev().fold(0, |w, b| (w << 8) | u64::from(*b))),
    );
}

/// Every context-local handle holds an id and a size.
const CLS_SIZE: usize = 16;

impl FrameDriver {
    fn new(builds: bool) -> Self {
        let sizes = HandleSizeTable::new(
            HandleType::ALL
                .iter()
                .map(|&ty| HandleSize { ty, size: CLS_SIZE }),
        )
        .expect("valid sizes");
        FrameDriver {
            sizes,
            builds,
            next_id: 1.into(),
            buffers: Mutex::default(),
        }
    }

    /// The engine records lists and replays them through [`Driver::execute`].
    pub fn replayed() -> Self {
        Self::new(false)
    }

    /// The driver builds its lists on the recording thread.
    pub fn driver_built() -> Self {
        Self::new(true)
    }

    /// The id and size a context-local block holds.
    fn block(locals: &mut LocalHandles<'_, Self>, h: Handle<Resource>) -> (u64, u64) {
        match locals.get(h.any()) {
            Some(l) => (word(l.local, 0), word(l.local, 1)),
            None => (0, 0),
        }
    }

    /// Finish: the context's buffer goes to list slot `slot` (or a new one), and the
    /// slot's old buffer, emptied, becomes the context's next.
    fn store(&self, dc: &mut Building, private: &mut [u8], reuse: bool) {
        let mut buffers = self.buffers.lock().expect("buffers");
        let slot = match reuse {
            true => word(private, 0) as u32,
            false => match buffers.free.pop() {
                Some(slot) => slot,
                None => {
                    buffers.slots.push(Vec::new());
                    (buffers.slots.len() - 1) as u32
                }
            },
        };
        let kept = &mut buffers.slots[slot as usize];
        kept.clear();
        core::mem::swap(kept, &mut dc.words);
        private[..8].copy_from_slice(&u64::from(slot).to_le_bytes());
    }
}

fn word(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at * 8..at * 8 + 8].try_into().expect("8 bytes"))
}

impl Driver for FrameDriver {
    type Object = FrameObject;
    type IcData = ();
    type Immediate = Stream;
    type Command = Draw;
    type Deferred = Building;

    fn threading_caps(&self) -> ThreadingCaps {
        ThreadingCaps::FREETHREADED
            | ThreadingCaps::COMMANDLISTS
            | ThreadingCaps::COMMANDLISTS_BUILD_2
    }

    fn builds_command_lists(&self) -> bool {
        self.builds
    }

    fn check_deferred_context_handle_sizes(&self, out: Option<&mut [HandleSize]>) -> usize {
        self.sizes.answer_poll(out)
    }

    fn calc_private_size(&self, desc: &ObjectDesc<'_>) -> usize {
        match desc {
            ObjectDesc::Resource(r) => r.byte_size as usize,
            _ => 0,
        }
    }

    fn calc_deferred_context_handle_size(&self, _ty: HandleType, _: Option<&FrameObject>) -> usize {
        CLS_SIZE
    }

    fn calc_private_command_list_size(&self) -> usize {
        8
    }

    fn create_object(
        &self,
        desc: &ObjectDesc<'_>,
        _memory: Option<AllocationHandle>,
        _dependency: Option<&FrameObject>,
    ) -> Result<(FrameObject, ())> {
        let size = match desc {
            ObjectDesc::Resource(r) => r.byte_size,
            _ => 0,
        };
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok((FrameObject { id, size }, ()))
    }

    fn destroy_object(&self, _ty: HandleType, _object: &FrameObject, _ic: &mut ()) {}

    fn create_immediate(&self) -> Result<Stream> {
        Ok(Stream::default())
    }

    fn execute(
        &self,
        imm: &mut Stream,
        objects: &Resolver<'_, Self>,
        op: Op<'_, Self>,
    ) -> Result<()> {
        match op {
            Op::Command(draw) => {
                let (cb, vb) = (objects.get(draw.cb)?, objects.get(draw.vb)?);
                let (cb, vb) = (cb.object(), vb.object());
                encode_draw((cb.id, cb.size), (vb.id, vb.size), &mut imm.words)
            }
            Op::WriteDiscard { data, .. } => {
                copy_in(data, &mut imm.words);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn flush(&self, imm: &mut Stream) {
        imm.words.clear();
    }

    fn execute_command_list(
        &self,
        imm: &mut Stream,
        list: &[u8],
        _objects: &Resolver<'_, Self>,
    ) -> Result<()> {
        if self.builds {
            let slot = word(list, 0);
            let len = self.buffers.lock().expect("buffers").slots[slot as usize].len();
            imm.words.extend([CHAIN, slot, len as u64]);
        }
        Ok(())
    }

    #[inline]
    fn record_deferred(
        &self,
        dc: &mut Building,
        call: DeferredCall<'_, Self>,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<()> {
        if !self.builds {
            return Ok(());
        }
        match call {
            DeferredCall::Command(draw) => {
                let (cb, vb) = (Self::block(locals, draw.cb), Self::block(locals, draw.vb));
                encode_draw(cb, vb, &mut dc.words)
            }
            DeferredCall::Unmap { .. } => {
                copy_in(&dc.staging, &mut dc.words);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn map_discard_deferred<'a>(
        &self,
        dc: &'a mut Building,
        _resource: Handle<Resource>,
        len: usize,
        _locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        dc.staging.resize(len, 0);
        Ok(&mut dc.staging)
    }

    fn create_deferred_context(&self, _id: DeferredId) -> Result<Building> {
        Ok(Building::default())
    }

    fn destroy_deferred_context(&self, _dc: Building) {}

    fn open_local(
        &self,
        _dc: &mut Building,
        _ty: HandleType,
        object: &FrameObject,
        _dependency: Option<&[u8]>,
        local: &mut [u8],
    ) -> Result<()> {
        local[..8].copy_from_slice(&object.id.to_le_bytes());
        local[8..16].copy_from_slice(&object.size.to_le_bytes());
        Ok(())
    }

    fn close_local(
        &self,
        _dc: &mut Building,
        _ty: HandleType,
        _object: &FrameObject,
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
        if self.builds {
            self.store(dc, private, false);
        }
        Ok(())
    }

    fn recycle_create_command_list(
        &self,
        dc: &mut Building,
        list: ListMemory<'_>,
        _state: StateView<'_>,
    ) -> Result<()> {
        if self.builds {
            self.store(dc, list.private, true);
        }
        Ok(())
    }

    fn destroy_command_list(&self, list: ListMemory<'_>) {
        if self.builds {
            let slot = word(list.private, 0) as u32;
            let mut buffers = self.buffers.lock().expect("buffers");
            buffers.slots[slot as usize] = Vec::new();
            buffers.free.push(slot);
        }
    }

    fn abandon_command_list(&self, dc: &mut Building) {
        dc.words.clear();
    }
}
