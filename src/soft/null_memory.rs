//! The null kernel's memory (R-M4, R-M5): each allocation's size, and bytes for the ones a
//! Map locks, made at their first lock and kept until the allocation goes, so that a steady
//! pattern of Maps allocates nothing. An allocation deallocated while locked keeps its bytes
//! until the unlock (the mapping points into them).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use core::ptr::NonNull;

use crate::error::{Error, Result};
use crate::kernel::AllocationHandle;
use crate::mapping::CpuMapping;

/// One allocation's memory.
struct Memory {
    size: u64,
    /// Made at the first lock.
    bytes: Option<Box<[u8]>>,
    locked: bool,
    /// Deallocated while locked: goes at the unlock.
    freed: bool,
}

/// Allocation ids are a counter's values: one multiplication spreads them (SipHash, the
/// default, would cost a Map more than the engine's own share of it).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Table = HashMap<u64, Memory, BuildHasherDefault<IdHasher>>;

/// The table, behind a mutex: allocations come from any creating thread (R-F1); locks only
/// from the immediate context's. (A real kernel's lock is a kernel call; this mutex is the
/// null kernel's whole cost of one.)
#[derive(Default)]
pub(crate) struct NullMemory {
    table: Mutex<Table>,
    /// Locks taken, locks ended, allocations deallocated while locked (for tests).
    locks: AtomicU64,
    unlocks: AtomicU64,
    freed_locked: AtomicU64,
}

/// Not the bytes: a mapping may be writing them (the table holds memory handed out as
/// `&mut [u8]`, which nothing else may read while it is locked).
impl core::fmt::Debug for NullMemory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NullMemory").finish_non_exhaustive()
    }
}

impl NullMemory {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes a new allocation of `size` bytes.
    pub(crate) fn allocated(&self, allocation: AllocationHandle, size: u64) {
        let memory = Memory {
            size,
            bytes: None,
            locked: false,
            freed: false,
        };
        self.table().insert(allocation.0.get(), memory);
    }

    /// Forgets an allocation (its bytes stay until the unlock if it is locked).
    pub(crate) fn deallocated(&self, allocation: AllocationHandle) {
        let mut table = self.table();
        let id = allocation.0.get();
        match table.get_mut(&id) {
            Some(m) if m.locked => {
                m.freed = true;
                self.freed_locked.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                table.remove(&id);
            }
        }
    }

    /// The allocation's bytes for the CPU until [`NullMemory::unlock`]: an unknown allocation
    /// or a second lock is [`Error::InvalidArg`]; bytes this process cannot have, out of
    /// memory.
    pub(crate) fn lock(&self, allocation: AllocationHandle) -> Result<CpuMapping> {
        let mut table = self.table();
        let memory = match table.get_mut(&allocation.0.get()) {
            Some(m) if !m.locked && !m.freed => m,
            _ => return Err(Error::InvalidArg),
        };
        let len = usize::try_from(memory.size).map_err(|_| Error::OutOfMemory)?;
        let bytes = match &mut memory.bytes {
            Some(bytes) => bytes,
            none => {
                let mut bytes = Vec::new();
                bytes
                    .try_reserve_exact(len)
                    .map_err(|_| Error::OutOfMemory)?;
                bytes.resize(len, 0);
                none.insert(bytes.into_boxed_slice())
            }
        };
        memory.locked = true;
        self.locks.fetch_add(1, Ordering::Relaxed);
        let ptr = NonNull::new(bytes.as_mut_ptr()).expect("a box's pointer is never null");
        // SAFETY: `ptr` is the start of a boxed slice of `len` bytes, which stays where it is
        // (moving the table's entry moves the box, not its bytes) and is neither freed nor
        // handed out again until the unlock: `locked` refuses a second lock, and
        // `deallocated` keeps a locked allocation's bytes until `unlock`. The table only
        // holds the box; nothing reads or writes its bytes but the mapping.
        Ok(unsafe { CpuMapping::from_raw(ptr, len) })
    }

    /// Locks taken and locks ended so far.
    pub(crate) fn lock_counts(&self) -> (u64, u64) {
        (
            self.locks.load(Ordering::Relaxed),
            self.unlocks.load(Ordering::Relaxed),
        )
    }

    /// Allocations deallocated while locked so far.
    pub(crate) fn deallocated_while_locked(&self) -> u64 {
        self.freed_locked.load(Ordering::Relaxed)
    }

    /// Ends the lock; the mapping's bytes are already the allocation's.
    pub(crate) fn unlock(&self, allocation: AllocationHandle, mapping: CpuMapping) {
        let mut table = self.table();
        let id = allocation.0.get();
        // The mapping goes first: its bytes may go with the entry below.
        drop(mapping);
        if let Some(m) = table.get_mut(&id) {
            self.unlocks.fetch_add(1, Ordering::Relaxed);
            m.locked = false;
            if m.freed {
                table.remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::num::NonZeroU64;

    fn a(id: u64) -> AllocationHandle {
        AllocationHandle(NonZeroU64::new(id).unwrap())
    }

    #[test]
    fn locked_bytes_are_the_allocations_from_lock_to_lock() {
        let memory = NullMemory::default();
        memory.allocated(a(1), 8);
        let mut mapping = memory.lock(a(1)).unwrap();
        assert!(memory.lock(a(1)).is_err(), "locked twice");
        // Formatting the table while the mapping lives reads none of its bytes (miri).
        assert_eq!(format!("{memory:?}"), "NullMemory { .. }");
        mapping.bytes_mut().copy_from_slice(&[7; 8]);
        memory.unlock(a(1), mapping);
        let mut again = memory.lock(a(1)).unwrap();
        assert_eq!(again.bytes_mut(), &[7; 8]);
        memory.unlock(a(1), again);
        memory.deallocated(a(1));
        assert!(memory.lock(a(1)).is_err(), "gone");
    }

    #[test]
    fn a_locked_allocation_deallocated_keeps_its_bytes_until_the_unlock() {
        let memory = NullMemory::default();
        memory.allocated(a(2), 4);
        let mut mapping = memory.lock(a(2)).unwrap();
        assert_eq!(memory.deallocated_while_locked(), 0);
        memory.deallocated(a(2));
        // Counted: the engine broke R-M4, and a test of the null kernel sees it.
        assert_eq!(memory.deallocated_while_locked(), 1);
        // Written after the deallocation: still the mapping's bytes (miri checks).
        mapping.bytes_mut().fill(3);
        assert_eq!(mapping.bytes_mut(), &[3; 4]);
        memory.unlock(a(2), mapping);
        assert_eq!(memory.lock_counts(), (1, 1));
        assert!(memory.lock(a(2)).is_err());
        assert!(memory.table().is_empty());
    }
}
