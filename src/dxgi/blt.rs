//! Blt (R-X6, R-X7): what the application asks, and the checks before any hook.

use bitflags::bitflags;

use crate::desc::{BindFlags, Subresource, Texture2d};
use crate::dxgi::{DisplayFormat, Rect, Rotation};
use crate::error::{AppError, Error, Result};
use crate::handle::{Handle, Resource};

bitflags! {
    /// `DXGI_DDI_ARG_BLT_FLAGS`. Bits beyond these are refused ([`BltFlags::from_raw`]).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct BltFlags: u32 {
        /// Resolve a multisampled source.
        const RESOLVE = 0x1;
        /// Convert the format.
        const CONVERT = 0x2;
        /// Stretch or shrink.
        const STRETCH = 0x4;
        /// Copy into the compositor's surface (present): never resolve into the
        /// destination and convert it in place (R-X6).
        const PRESENT = 0x8;
    }
}

impl BltFlags {
    /// The flags a raw `DXGI_DDI_ARG_BLT_FLAGS` value names; `None` when a reserved bit is
    /// set.
    pub fn from_raw(raw: u32) -> Option<Self> {
        BltFlags::from_bits(raw)
    }
}

bitflags! {
    /// What a driver's Blt can do beyond R-X6's minimum.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct BltCaps: u32 {
        /// The driver can refuse to create primaries it cannot scan out, so the runtime may
        /// ask it to rotate (R-X6); without this, a rotating Blt is refused.
        const ROTATION = 0x1;
    }
}

/// A Blt, as the application asks it (`DXGI_DDI_ARG_BLT`; with `src_rect`, `Blt1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BltArgs {
    /// The destination.
    pub dst: Handle<Resource>,
    /// Its subresource.
    pub dst_subresource: u32,
    /// Where in it.
    pub dst_rect: Rect,
    /// The source.
    pub src: Handle<Resource>,
    /// Its subresource.
    pub src_subresource: u32,
    /// The part of it to copy (`Blt1`); `None`: all of it.
    pub src_rect: Option<Rect>,
    /// What the Blt may do.
    pub flags: BltFlags,
    /// The rotation.
    pub rotation: Rotation,
}

/// A Blt that passed R-X7's checks: where both subresources lie, and what to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BltPlan {
    /// The source's shape.
    pub src_texture: Texture2d,
    /// The source's format.
    pub src_format: DisplayFormat,
    /// Where the source subresource lies.
    pub src: Subresource,
    /// The part of it read.
    pub src_rect: Rect,
    /// The destination's format.
    pub dst_format: DisplayFormat,
    /// Where the destination subresource lies.
    pub dst: Subresource,
    /// The part of it written.
    pub dst_rect: Rect,
    /// The rotation.
    pub rotation: Rotation,
    /// The flags.
    pub flags: BltFlags,
}

/// What R-X7 checks of a resource: its texture shape and bind flags.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BltSide {
    pub(crate) texture: Option<Texture2d>,
    pub(crate) bind: BindFlags,
}

/// R-X6 and R-X7's checks, all before any hook; each failure is the application's error
/// (R-E1), but for flag bits no `DXGI_DDI_ARG_BLT_FLAGS` defines (a value built with
/// `from_bits_retain`), which are `InvalidArg` as [`BltFlags::from_raw`] refuses them: 2D
/// textures in display formats (`NotDisplayFormat`), the source bound with the
/// present flag and the destination as a render target (`BadBindFlags`), subresources and
/// rectangles in range (`OutOfRange`), multisampled source if and only if Resolve, a
/// single-sampled destination, never a plain copy (no flag, no rotation), never one
/// subresource onto itself, rotation only for a driver with [`BltCaps::ROTATION`]
/// (`InvalidState`).
pub(crate) fn validate(
    same_resource: bool,
    src: BltSide,
    dst: BltSide,
    args: &BltArgs,
    caps: BltCaps,
) -> Result<BltPlan> {
    if BltFlags::from_bits(args.flags.bits()).is_none() {
        return Err(Error::InvalidArg);
    }
    let shape = |side: BltSide| -> Result<(Texture2d, DisplayFormat)> {
        let texture = side.texture.ok_or(AppError::NotDisplayFormat)?;
        let format = DisplayFormat::from_dxgi(texture.format).ok_or(AppError::NotDisplayFormat)?;
        Ok((texture, format))
    };
    let (src_texture, src_format) = shape(src)?;
    let (dst_texture, dst_format) = shape(dst)?;
    if !src.bind.contains(BindFlags::PRESENT) || !dst.bind.contains(BindFlags::RENDER_TARGET) {
        return Err(AppError::BadBindFlags.into());
    }
    let src_sub = src_texture
        .subresource(args.src_subresource)
        .ok_or(AppError::OutOfRange)?;
    let dst_sub = dst_texture
        .subresource(args.dst_subresource)
        .ok_or(AppError::OutOfRange)?;
    let src_rect = args
        .src_rect
        .unwrap_or(Rect::whole(src_sub.width, src_sub.height));
    if !src_rect.is_inside(src_sub.width, src_sub.height)
        || !args.dst_rect.is_inside(dst_sub.width, dst_sub.height)
    {
        return Err(AppError::OutOfRange.into());
    }
    let invalid = AppError::InvalidState;
    let resolving = args.flags.contains(BltFlags::RESOLVE);
    if resolving != (src_texture.samples > 1) || dst_texture.samples != 1 {
        return Err(invalid.into());
    }
    if args.flags.is_empty() && !args.rotation.rotates() {
        return Err(invalid.into()); // a plain copy goes through ResourceCopy (R-X6)
    }
    if same_resource && args.src_subresource == args.dst_subresource {
        return Err(invalid.into());
    }
    if args.rotation.rotates() && !caps.contains(BltCaps::ROTATION) {
        return Err(invalid.into());
    }
    Ok(BltPlan {
        src_texture,
        src_format,
        src: src_sub,
        src_rect,
        dst_format,
        dst: dst_sub,
        dst_rect: args.dst_rect,
        rotation: args.rotation,
        flags: args.flags,
    })
}
