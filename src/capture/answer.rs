//! What a call answers besides success, as the one number a capture keeps of it
//! ([`super::Call::Answer`]), so that a replay finds a call that succeeded with another
//! answer.

use crate::dxgi::{DisplayModeOutcome, GammaCaps, PresentStatus};

/// A call's answer, as a capture keeps it: the value itself where it fits in 64 bits, a
/// CRC-32 of it where it does not.
pub(crate) trait Answer {
    /// The number recorded.
    fn answer(&self) -> u64;
}

/// `query_signaled`'s and `resource_is_busy`'s answer: 1 for true.
impl Answer for bool {
    fn answer(&self) -> u64 {
        u64::from(*self)
    }
}

/// The present callback's `HRESULT`, as its 32 bits.
impl Answer for PresentStatus {
    fn answer(&self) -> u64 {
        u64::from(self.0 as u32)
    }
}

/// 0 for a mode set; the private format's attribute, with bit 32 set, for a primary whose
/// format does not fit.
impl Answer for DisplayModeOutcome {
    fn answer(&self) -> u64 {
        match *self {
            DisplayModeOutcome::Set => 0,
            DisplayModeOutcome::IncompatiblePrivateFormat { attribute } => {
                (1 << 32) + u64::from(attribute)
            }
        }
    }
}

/// A CRC-32 of the caps: scale and offset, the converted range and every control point.
impl Answer for GammaCaps {
    fn answer(&self) -> u64 {
        let mut crc = crc32fast::Hasher::new();
        crc.update(&[u8::from(self.scale_and_offset())]);
        for value in [self.min_converted(), self.max_converted()]
            .iter()
            .chain(self.positions())
        {
            crc.update(&value.to_bits().to_le_bytes());
        }
        u64::from(crc.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_that_differ_are_recorded_apart() {
        assert_eq!((true.answer(), false.answer()), (1, 0));
        assert_eq!(PresentStatus(-1).answer(), 0xFFFF_FFFF);
        assert_eq!(PresentStatus(0x087A_0001).answer(), 0x087A_0001);
        let incompatible = DisplayModeOutcome::IncompatiblePrivateFormat { attribute: 0 };
        assert_ne!(incompatible.answer(), DisplayModeOutcome::Set.answer());
        assert_eq!(
            DisplayModeOutcome::IncompatiblePrivateFormat { attribute: 7 }.answer(),
            (1 << 32) | 7
        );
        let caps = |points| GammaCaps::uniform(points).unwrap().answer();
        assert_eq!(caps(256), caps(256));
        assert_ne!(caps(256), caps(1024));
    }
}
