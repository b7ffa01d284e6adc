//! GetGammaCaps (R-X2): the gamma control capabilities, and their C layout.

use crate::error::{Error, Result};

/// Control points a gamma curve may have at most (`DXGI_GAMMA_CONTROL_CAPABILITIES`).
pub const MAX_GAMMA_POINTS: usize = 1025;

/// The gamma control capabilities a driver reports (R-X2). Made with
/// [`GammaCaps::uniform`] or [`GammaCaps::new`], which check what the DDI requires: 2 to
/// 1025 points, strictly increasing, within `[min, max]`, `min < max`.
#[derive(Clone, Debug, PartialEq)]
pub struct GammaCaps {
    scale_and_offset: bool,
    min_converted: f32,
    max_converted: f32,
    positions: Vec<f32>,
}

impl GammaCaps {
    /// `points` control points evenly spread over 0 to 1, converting to 0 to 1, without
    /// scale and offset (Wine answers 256 points, DXVK 1024).
    pub fn uniform(points: u16) -> Result<Self> {
        let last = f32::from(points.max(1) - 1);
        let positions = (0..points).map(|i| f32::from(i) / last).collect();
        GammaCaps::new(false, 0.0, 1.0, positions)
    }

    /// Capabilities from their parts, checked (an answer the DDI does not allow is the
    /// driver's error, [`Error::InvalidArg`]).
    pub fn new(
        scale_and_offset: bool,
        min_converted: f32,
        max_converted: f32,
        positions: Vec<f32>,
    ) -> Result<Self> {
        let in_range = positions
            .iter()
            .all(|p| (min_converted..=max_converted).contains(p));
        let increasing = positions.windows(2).all(|w| w[0] < w[1]);
        // Written so that a NaN bound fails too.
        let ordered = min_converted < max_converted;
        if !(2..=MAX_GAMMA_POINTS).contains(&positions.len())
            || !ordered
            || !in_range
            || !increasing
        {
            return Err(Error::InvalidArg);
        }
        Ok(GammaCaps {
            scale_and_offset,
            min_converted,
            max_converted,
            positions,
        })
    }

    /// Whether scale and offset are supported.
    pub fn scale_and_offset(&self) -> bool {
        self.scale_and_offset
    }

    /// The lowest converted value.
    pub fn min_converted(&self) -> f32 {
        self.min_converted
    }

    /// The highest converted value.
    pub fn max_converted(&self) -> f32 {
        self.max_converted
    }

    /// The control points' positions.
    pub fn positions(&self) -> &[f32] {
        &self.positions
    }

    /// The C structure a shim copies out (`DXGI_GAMMA_CONTROL_CAPABILITIES`), with the
    /// maximum before the minimum as the header declares them.
    pub fn to_ddi(&self) -> DdiGammaControlCaps {
        let mut positions = [0.0; MAX_GAMMA_POINTS];
        positions[..self.positions.len()].copy_from_slice(&self.positions);
        DdiGammaControlCaps {
            scale_and_offset_supported: i32::from(self.scale_and_offset),
            max_converted_value: self.max_converted,
            min_converted_value: self.min_converted,
            num_gamma_control_points: self.positions.len() as u32,
            control_point_positions: positions,
        }
    }
}

/// `DXGI_GAMMA_CONTROL_CAPABILITIES` as C lays it out: `BOOL ScaleAndOffsetSupported; float
/// MaxConvertedValue; float MinConvertedValue; UINT NumGammaControlPoints; float
/// ControlPointPositions[1025];` (4116 bytes; Max comes before Min).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct DdiGammaControlCaps {
    /// `ScaleAndOffsetSupported` (a `BOOL`).
    pub scale_and_offset_supported: i32,
    /// `MaxConvertedValue`.
    pub max_converted_value: f32,
    /// `MinConvertedValue`.
    pub min_converted_value: f32,
    /// `NumGammaControlPoints`.
    pub num_gamma_control_points: u32,
    /// `ControlPointPositions`.
    pub control_point_positions: [f32; MAX_GAMMA_POINTS],
}

const _: () = assert!(core::mem::size_of::<DdiGammaControlCaps>() == 4116);
const _: () = assert!(core::mem::offset_of!(DdiGammaControlCaps, max_converted_value) == 4);
const _: () = assert!(core::mem::offset_of!(DdiGammaControlCaps, min_converted_value) == 8);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r_x2_gamma_caps_are_checked_and_laid_out_as_c() {
        let caps = GammaCaps::uniform(256).unwrap();
        assert_eq!(caps.positions().len(), 256);
        assert_eq!(caps.positions()[255], 1.0);
        let ddi = caps.to_ddi();
        assert_eq!(ddi.num_gamma_control_points, 256);
        assert_eq!(
            (ddi.min_converted_value, ddi.max_converted_value),
            (0.0, 1.0)
        );
        for bad in [
            GammaCaps::new(false, 0.0, 1.0, vec![0.5]),
            GammaCaps::new(false, 0.0, 1.0, vec![0.0, 0.5, 0.5]),
            GammaCaps::new(false, 0.0, 1.0, vec![0.0, 2.0]),
            GammaCaps::new(false, 1.0, 0.0, vec![0.0, 1.0]),
            GammaCaps::new(false, 0.0, 1.0, vec![0.0; MAX_GAMMA_POINTS + 1]),
            GammaCaps::new(false, 0.0, 1.0, vec![f32::NAN, 1.0]),
            GammaCaps::uniform(1),
        ] {
            assert_eq!(bad, Err(Error::InvalidArg));
        }
    }
}
