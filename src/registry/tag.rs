//! Device tags: the top bits of every handle's index, unique among live devices, so a handle
//! of one device is never taken for an object of another (R-E1).
//!
//! Tags come from a process-wide bitmap, handed out round-robin so that a dropped device's
//! tag is reused as late as possible; each device also salts the first generation of its
//! slots, so a stale handle of a dropped device aliases an object of a new device with the
//! same tag only if its 32-bit generation matches by chance.

use core::num::NonZeroU32;

use crate::error::{Error, Result};
use crate::handle::DEVICE_TAG_BITS;
use crate::primitive::{AtomicU32, AtomicU64, Ordering};

const TAGS: usize = 1 << DEVICE_TAG_BITS;
const WORDS: usize = TAGS / 64;

#[cfg(not(loom))]
static IN_USE: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];
#[cfg(not(loom))]
static NEXT: AtomicU32 = AtomicU32::new(0);

#[cfg(loom)]
loom::lazy_static! {
    static ref IN_USE: [AtomicU64; WORDS] = core::array::from_fn(|_| AtomicU64::new(0));
    static ref NEXT: AtomicU32 = AtomicU32::new(0);
}

/// A device's tag, released when dropped.
#[derive(Debug)]
pub(crate) struct DeviceTag {
    tag: u8,
    first_generation: NonZeroU32,
}

impl DeviceTag {
    /// Takes the next free tag; [`Error::OutOfMemory`] when all 256 are in use.
    pub(crate) fn acquire() -> Result<Self> {
        let serial = NEXT.fetch_add(1, Ordering::Relaxed);
        for probe in 0..TAGS as u32 {
            let tag = (serial.wrapping_add(probe) as usize) % TAGS;
            let bit = 1u64 << (tag % 64);
            if IN_USE[tag / 64].fetch_or(bit, Ordering::AcqRel) & bit == 0 {
                // A multiplicative hash of the serial, kept below 2^31 so every slot has at
                // least 2^31 lives before its generation would wrap.
                let salt = serial.wrapping_mul(0x9E37_79B9) & 0x7FFF_FFFF;
                let first_generation = NonZeroU32::new(salt.max(1)).expect("max(1) is non-zero");
                return Ok(DeviceTag {
                    tag: tag as u8,
                    first_generation,
                });
            }
        }
        Err(Error::OutOfMemory)
    }

    pub(crate) fn tag(&self) -> u8 {
        self.tag
    }

    pub(crate) fn first_generation(&self) -> NonZeroU32 {
        self.first_generation
    }
}

impl Drop for DeviceTag {
    fn drop(&mut self) {
        let tag = self.tag as usize;
        IN_USE[tag / 64].fetch_and(!(1u64 << (tag % 64)), Ordering::AcqRel);
    }
}
