//! The draw of the API-overhead benches (`api_overhead.rs` timed, `api_overhead_ic.rs`
//! counted): a game's draw call as the runtime sees it, over the null driver
//! (`cmdlist::soft::null`), the same code on either context.
//!
//! One draw, in the order a game makes its calls:
//! 1. two binds: an instance buffer at vertex-buffer slot 1 and a texture at the pixel
//!    stage's shader-resource slot 0, both from one of [`MATERIALS`] materials in turn;
//! 2. every [`CONSTANTS_EVERY`]th draw, Map(WRITE_DISCARD) of a [`CONSTANTS_BYTES`]-byte
//!    constant buffer, its bytes written, Unmap;
//! 3. its [`VERTEX_BYTES`] of vertices appended to a dynamic vertex buffer used as a ring:
//!    Map(WRITE_NO_OVERWRITE), the bytes written at the ring's next offset, Unmap; a
//!    Map(WRITE_DISCARD) instead where the ring wraps, and, on a deferred context, at the
//!    start of each recording (a recording's first Map of a resource must discard);
//! 4. the draw command (the null driver's one command, naming two objects).
//!
//! The ring is [`RING_BYTES`] on either context, a wrap every [`RING_DRAWS`] draws. On the
//! immediate context the first append after a wrap waits for the buffer that carries the
//! discard, flushing it, as a game's ring pays once a wrap; a deferred context's recording
//! discards it at its first draw (a recording's first Map of a resource must discard, R-M2)
//! and at each wrap after.

use std::hint::black_box;

use cmdlist::handle::Resource;
use cmdlist::soft::null::{CopyCommand, NullDevice, NullDriver, NullKernel};
use cmdlist::{
    BindClass, BindFlags, BindPoint, DeferredContext, Handle, ImmediateContext, ResourceDesc,
    Result, Stage, Usage,
};

/// Bytes of vertices a draw appends to the ring: a quad, four vertices of 16 bytes.
pub const VERTEX_BYTES: usize = 64;
/// The constant buffer is discarded and written once every this many draws.
pub const CONSTANTS_EVERY: u64 = 16;
/// The ring's size: [`RING_DRAWS`] draws between two discards.
pub const RING_BYTES: usize = 256 * 1024;
/// Draws between two discards of the ring.
pub const RING_DRAWS: u64 = (RING_BYTES / VERTEX_BYTES) as u64;
/// The constant buffer's size.
pub const CONSTANTS_BYTES: usize = 64;
/// Materials the draws cycle through (an instance buffer and a texture each).
pub const MATERIALS: usize = 8;
/// Where a draw binds its material's instance buffer.
pub const INSTANCES_AT: BindPoint = BindPoint::new(BindClass::VertexBuffer, 1);
/// Where a draw binds its material's texture.
pub const TEXTURE_AT: BindPoint = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0);

/// The objects a stream of draws names. Each recording thread has its own: its own ring and
/// constant buffer, as a game gives each of its threads.
#[derive(Clone, Copy)]
pub struct Mix {
    /// The dynamic vertex buffer the draws append their vertices to.
    pub ring: Handle<Resource>,
    /// Its size in bytes.
    pub ring_bytes: usize,
    /// The dynamic constant buffer discarded every [`CONSTANTS_EVERY`] draws.
    pub constants: Handle<Resource>,
    /// The materials' instance buffers, bound at [`INSTANCES_AT`].
    pub instances: [Handle<Resource>; MATERIALS],
    /// The materials' textures, bound at [`TEXTURE_AT`].
    pub textures: [Handle<Resource>; MATERIALS],
    /// The draw command: a render target drawn into from the ring.
    pub draw: CopyCommand,
}

impl Mix {
    /// The objects of a stream of draws, made on `device`, with a ring of `ring_bytes`.
    pub fn new(device: &NullDevice, ring_bytes: usize) -> Result<Mix> {
        let resource = |byte_size: usize, bind: BindFlags, usage: Usage| {
            device.create_resource(ResourceDesc {
                byte_size: byte_size as u64,
                bind,
                usage,
                ..Default::default()
            })
        };
        let ring = resource(ring_bytes, BindFlags::VERTEX_BUFFER, Usage::Dynamic)?;
        let constants = resource(CONSTANTS_BYTES, BindFlags::CONSTANT_BUFFER, Usage::Dynamic)?;
        let mut instances = [ring; MATERIALS];
        let mut textures = [ring; MATERIALS];
        for (instance, texture) in instances.iter_mut().zip(&mut textures) {
            *instance = resource(256, BindFlags::VERTEX_BUFFER, Usage::Default)?;
            *texture = resource(256, BindFlags::SHADER_RESOURCE, Usage::Default)?;
        }
        let target = resource(256, BindFlags::RENDER_TARGET, Usage::Default)?;
        Ok(Mix {
            ring,
            ring_bytes,
            constants,
            instances,
            textures,
            draw: CopyCommand {
                dst: target,
                src: ring,
            },
        })
    }
}

/// Where the next draw's vertices go in a ring.
#[derive(Clone, Copy, Debug, Default)]
pub struct RingCursor {
    /// The next append's offset; `None` until the ring is discarded (on a deferred context,
    /// at the start of each recording).
    next: Option<usize>,
}

impl RingCursor {
    /// A ring whose next append must discard it: a deferred context's new recording.
    pub fn restart(&mut self) {
        self.next = None;
    }

    /// The offset of the next append, if it needs no discard.
    pub fn next(&self) -> Option<usize> {
        self.next
    }
}

/// The calls a draw makes, on either context: the deferred context takes its command by
/// value, the immediate one by reference.
pub trait MixContext {
    /// Binds `object` at `point`.
    fn bind(&mut self, point: BindPoint, object: Handle<Resource>) -> Result<()>;
    /// Map(WRITE_DISCARD).
    fn map_discard(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]>;
    /// Map(WRITE_NO_OVERWRITE).
    fn map_no_overwrite(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]>;
    /// Unmap.
    fn unmap(&mut self, resource: Handle<Resource>) -> Result<()>;
    /// The draw command.
    fn command(&mut self, command: CopyCommand) -> Result<()>;
}

impl MixContext for DeferredContext<NullDriver, NullKernel> {
    #[inline(always)]
    fn bind(&mut self, point: BindPoint, object: Handle<Resource>) -> Result<()> {
        DeferredContext::bind(self, point, Some(object.any()))
    }
    #[inline(always)]
    fn map_discard(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        DeferredContext::map_discard(self, resource)
    }
    #[inline(always)]
    fn map_no_overwrite(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        DeferredContext::map_no_overwrite(self, resource)
    }
    #[inline(always)]
    fn unmap(&mut self, resource: Handle<Resource>) -> Result<()> {
        DeferredContext::unmap(self, resource)
    }
    #[inline(always)]
    fn command(&mut self, command: CopyCommand) -> Result<()> {
        DeferredContext::command(self, command)
    }
}

impl MixContext for ImmediateContext<NullDriver, NullKernel> {
    #[inline(always)]
    fn bind(&mut self, point: BindPoint, object: Handle<Resource>) -> Result<()> {
        ImmediateContext::bind(self, point, Some(object.any()))
    }
    #[inline(always)]
    fn map_discard(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        ImmediateContext::map_discard(self, resource)
    }
    #[inline(always)]
    fn map_no_overwrite(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        ImmediateContext::map_no_overwrite(self, resource)
    }
    #[inline(always)]
    fn unmap(&mut self, resource: Handle<Resource>) -> Result<()> {
        ImmediateContext::unmap(self, resource)
    }
    #[inline(always)]
    fn command(&mut self, command: CopyCommand) -> Result<()> {
        ImmediateContext::command(self, &command)
    }
}

/// Draw `n` of a stream: two binds, the constants every [`CONSTANTS_EVERY`]th draw, the
/// vertices appended to the ring at `cursor`, the command. Panics if a call fails: a bench
/// that measured failing calls would measure nothing.
#[inline(always)]
pub fn draw<C: MixContext>(ctx: &mut C, mix: &Mix, cursor: &mut RingCursor, n: u64) {
    let material = n as usize % MATERIALS;
    ctx.bind(INSTANCES_AT, mix.instances[material])
        .expect("bind instances");
    ctx.bind(TEXTURE_AT, mix.textures[material])
        .expect("bind texture");
    if n % CONSTANTS_EVERY == 0 {
        let constants = ctx.map_discard(mix.constants).expect("map constants");
        constants.fill(black_box(n) as u8);
        ctx.unmap(mix.constants).expect("unmap constants");
    }
    let (vertices, at) = match cursor.next {
        Some(at) if at + VERTEX_BYTES <= mix.ring_bytes => (ctx.map_no_overwrite(mix.ring), at),
        _ => (ctx.map_discard(mix.ring), 0),
    };
    vertices.expect("map ring")[at..at + VERTEX_BYTES].fill(black_box(n) as u8);
    ctx.unmap(mix.ring).expect("unmap ring");
    cursor.next = Some(at + VERTEX_BYTES);
    ctx.command(black_box(mix.draw)).expect("draw");
}

/// Operations a deferred context records for the first `count` draws of a recording that
/// starts at a draw whose index is a multiple of [`CONSTANTS_EVERY`]: three a draw (the two
/// binds and the command; an append records none), and one more for each discard's Unmap
/// (the constants' at every [`CONSTANTS_EVERY`]th draw, the ring's at the recording's first
/// draw and every [`RING_DRAWS`] after).
pub fn recorded_operations(count: u64) -> usize {
    (3 * count + count.div_ceil(CONSTANTS_EVERY) + count.div_ceil(RING_DRAWS)) as usize
}
