//! The DXGI Blt on the GPU (R-X6, R-X7): a compute dispatch of `shaders/blt.comp` over the
//! destination rectangle, with the CPU reference's addressing and working domain
//! ([`cmdlist::dxgi::reference`]).
//!
//! Supported: the four 32-bit formats with 8-bit channels (`R8G8B8A8_UNORM`,
//! `R8G8B8A8_UNORM_SRGB`, `B8G8R8A8_UNORM`, `B8G8R8X8_UNORM`) on both sides, in any pair,
//! single-sampled sources, no rotation, any stretch (bilinear): the main job's
//! `R8G8B8A8_UNORM_SRGB` canvas stretched 2x into a `B8G8R8A8_UNORM` back buffer, and the
//! identity copies among them. Everything else ([`DisplayFormat::R16G16B16A16Float`], the
//! 16-bit and 10-bit formats, a resolve, a rotation, which [`crate::VulkanDriver`]'s empty
//! `blt_caps` refuses before the driver anyway) is [`Error::Unsupported`]. The integer tap
//! positions are the reference's exactly; the weights, the sRGB curves and the divisions
//! are the GPU's `float`s, so a blended pixel may differ from the reference by one code per
//! channel (the tests' tolerance); an unblended one (every tap on a texel centre) is exact.

use ash::vk;
use cmdlist::dxgi::{DisplayFormat, Rect};
use cmdlist::{Error, Result, Subresource};

use crate::encode::{bound, Encoder, Span};

/// One side of a Blt: the bytes of its resource (the whole allocation's span), where its
/// subresource lies, its format and rectangle.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Side {
    pub(crate) span: Span,
    pub(crate) place: Subresource,
    pub(crate) format: DisplayFormat,
    pub(crate) rect: Rect,
}

/// The shader's format code, or unsupported.
fn code(format: DisplayFormat) -> Result<u32> {
    match format {
        DisplayFormat::R8G8B8A8Unorm | DisplayFormat::R8G8B8A8UnormSrgb => Ok(0),
        DisplayFormat::B8G8R8A8Unorm => Ok(1),
        DisplayFormat::B8G8R8X8Unorm => Ok(2),
        _ => Err(Error::Unsupported),
    }
}

/// Whether any destination index of `n` over `m` source indices blends two texels (the
/// reference's taps: `((2k + 1) m - n) / 2n`, weight 0 on a texel centre or at a clamp).
fn blends(n: u32, m: u32) -> bool {
    let (n, m) = (i64::from(n), i64::from(m));
    (0..n).any(|k| {
        let p = (2 * k + 1) * m - n;
        let t0 = p.div_euclid(2 * n);
        p.rem_euclid(2 * n) != 0 && t0.clamp(0, m - 1) != (t0 + 1).clamp(0, m - 1)
    })
}

/// The shader's push constants for a Blt from `src` to `dst`, or unsupported.
fn push_constants(src: &Side, dst: &Side) -> Result<[u32; 15]> {
    let (src_fmt, dst_fmt) = (code(src.format)?, code(dst.format)?);
    let word = |span: &Span, place: &Subresource| -> Result<u32> {
        let at = span.offset + place.offset;
        let end = place
            .offset
            .checked_add(place.len)
            .ok_or(Error::InvalidArg)?;
        let pixels = u64::from(place.width) * u64::from(place.height);
        if at % 4 != 0 || end > span.len || place.len != pixels * 4 {
            return Err(Error::InvalidArg);
        }
        u32::try_from(at / 4).map_err(|_| Error::Unsupported)
    };
    let (sr, dr) = (src.rect, dst.rect);
    if !sr.is_inside(src.place.width, src.place.height)
        || !dr.is_inside(dst.place.width, dst.place.height)
    {
        return Err(Error::InvalidArg);
    }
    let (sw, sh, dw, dh) = (sr.width(), sr.height(), dr.width(), dr.height());
    // The shader's tap positions, `(2k + 1) m` with k < n, in 32-bit integers.
    let fits = |n: u32, m: u32| 2 * u64::from(n) * u64::from(m) < 1 << 31;
    if !fits(dw, sw) || !fits(dh, sh) || dw.div_ceil(8) > 65535 || dh.div_ceil(8) > 65535 {
        return Err(Error::Unsupported);
    }
    let linear = src.format.is_srgb() && (blends(dw, sw) || blends(dh, sh));
    Ok([
        word(&src.span, &src.place)?,
        src.place.width,
        sr.left,
        sr.top,
        sw,
        sh,
        word(&dst.span, &dst.place)?,
        dst.place.width,
        dr.left,
        dr.top,
        dw,
        dh,
        src_fmt,
        dst_fmt,
        u32::from(linear),
    ])
}

impl Encoder<'_> {
    /// A Blt from `src` to `dst` (never the same subresource: R-X7), ordered by the hazard
    /// rule (a read of the bytes the source's descriptor covers, a write of the
    /// destination's). Refused (unsupported formats or sizes) before anything is recorded.
    pub(crate) fn blt(&mut self, src: &Side, dst: &Side) -> Result<()> {
        let push = push_constants(src, dst)?;
        let compute = self.world.compute.as_ref().ok_or(Error::Unsupported)?;
        self.bind_compute(compute.blt, &[(0, src.span), (2, dst.span)])?;
        self.note(src.span);
        self.note(dst.span);
        let mut bytes = [0u8; 60];
        for (b, w) in bytes.chunks_exact_mut(4).zip(push) {
            b.copy_from_slice(&w.to_ne_bytes());
        }
        let (dw, dh) = (dst.rect.width(), dst.rect.height());
        self.order(&[bound(src.span)], &[bound(dst.span)]);
        // SAFETY: recording state, outside a render pass, the Blt pipeline and its
        // descriptors bound just above; 60 bytes of push constants at offset 0, inside the
        // layout's COMPUTE range (VUID-vkCmdPushConstants-offset-01795, -size-00369); group
        // counts at most 65535 (checked, VUID-vkCmdDispatch-groupCountX-00386, -Y-00387);
        // every word the shader reaches lies in its subresource, inside its buffer (checked
        // in `push_constants`).
        unsafe {
            let device = &self.world.device;
            let layout = compute.layout;
            device.cmd_push_constants(self.cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &bytes);
            device.cmd_dispatch(self.cmd, dw.div_ceil(8), dh.div_ceil(8), 1);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::blends;

    #[test]
    fn blends_only_when_taps_fall_between_centres() {
        assert!(!blends(7, 7), "same size: every tap on a centre");
        assert!(blends(8, 4), "2x: between centres");
        assert!(blends(4, 8), "1/2x: between centres");
        assert!(!blends(1, 3), "one pixel over three: the middle centre");
        assert!(!blends(5, 1), "one source texel: the clamp");
    }
}
