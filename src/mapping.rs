//! CPU access to kernel memory (`pfnLockCb` / `pfnUnlockCb`): what a kernel hands the engine
//! for a Map that reaches a resource's own memory (R-M4), and the flags it is asked with.

use core::ptr::NonNull;

use bitflags::bitflags;

bitflags! {
    /// How a lock is asked for (the `D3DDDICB_LOCKFLAGS` the engine uses).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct LockFlags: u32 {
        /// `ReadOnly`: the CPU reads only (a Map(READ)).
        const READ_ONLY = 0x1;
        /// `WriteOnly`: the CPU writes only (Map(WRITE), Map(NO_OVERWRITE)).
        const WRITE_ONLY = 0x2;
        /// `IgnoreSync`: do not wait for the GPU, which may still use the allocation. The
        /// engine sets it for a Map(NO_OVERWRITE), whose application promised not to touch
        /// what the GPU uses (R-M2), and for a rename's memory (with
        /// `NO_EXISTING_REFERENCE`, R-M5); never for a staging Map, for which it waited
        /// itself for the newest buffer that uses the resource (R-M4), so a kernel's wait
        /// returns at once.
        const IGNORE_SYNC = 0x8;
        /// `NoExistingReference`: no command buffer, submitted and unfinished or still
        /// open, references the allocation; the engine asks it of the allocation a
        /// Map(DISCARD) renames to (R-M5), whose buffers the GPU finished.
        const NO_EXISTING_REFERENCE = 0x100;
        /// The engine's own flag, not a `D3DDDICB_LOCKFLAGS` one: the lock may outlive the
        /// Map it was taken for, kept across Maps while buffers that use the allocation
        /// run, until the unlock before its deallocation. Asked only of a kernel that
        /// answers [`crate::Kernel::persistent_locks`] with `true` (R-M3..R-M5).
        const PERSISTENT = 0x8000_0000;
    }
}

/// The memory a kernel hands out for a lock, until its unlock: the bytes the application
/// reads and writes between Map and Unmap.
///
/// Either memory the mapping owns (a kernel that keeps allocations elsewhere copies them in
/// at the lock and back at the unlock: [`CpuMapping::owned`]), or the kernel's own memory
/// ([`CpuMapping::from_raw`], whose caller promises it stays valid and untouched until the
/// unlock). The engine gives the mapping back to [`crate::Kernel::unlock`] at the Unmap.
#[derive(Debug)]
pub struct CpuMapping {
    memory: Memory,
}

/// Where a mapping's bytes are. The owned ones are reached only through their box (a raw
/// pointer kept beside it would be invalidated each time the box moves).
#[derive(Debug)]
enum Memory {
    Owned(Box<[u8]>),
    Kernel { ptr: NonNull<u8>, len: usize },
}

// SAFETY: the bytes are either owned (a `Box<[u8]>`, `Send`) or the kernel's memory, which
// `from_raw`'s caller promised is the mapping's alone until its unlock, wherever that runs.
unsafe impl Send for CpuMapping {}

impl CpuMapping {
    /// A mapping of memory it owns.
    pub fn owned(bytes: Box<[u8]>) -> Self {
        CpuMapping {
            memory: Memory::Owned(bytes),
        }
    }

    /// A mapping of the kernel's memory at `ptr`, `len` bytes.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` bytes, and nothing else reads or writes
    /// them (nor frees them) until the kernel's [`crate::Kernel::unlock`] for this mapping
    /// has begun.
    pub unsafe fn from_raw(ptr: NonNull<u8>, len: usize) -> Self {
        CpuMapping {
            memory: Memory::Kernel { ptr, len },
        }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.memory {
            Memory::Owned(bytes) => bytes,
            // SAFETY: the kernel's memory is valid for `len` bytes and the mapping's alone
            // until its unlock (`from_raw`'s contract); `&self` keeps it from being written
            // through this mapping meanwhile.
            Memory::Kernel { ptr, len } => unsafe {
                core::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
        }
    }

    /// The bytes, to write.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.memory {
            Memory::Owned(bytes) => bytes,
            // SAFETY: as in `bytes`; `&mut self` makes this the only reference.
            Memory::Kernel { ptr, len } => unsafe {
                core::slice::from_raw_parts_mut(ptr.as_ptr(), *len)
            },
        }
    }

    /// The owned memory back (a kernel that copies it back at the unlock), or `None` for the
    /// kernel's own.
    pub fn into_owned(self) -> Option<Box<[u8]>> {
        match self.memory {
            Memory::Owned(bytes) => Some(bytes),
            Memory::Kernel { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CpuMapping;

    /// Owned memory: written through the mapping, handed back whole; a raw mapping reaches
    /// the memory it was made of (run under miri).
    #[test]
    fn r_m4_a_mapping_reaches_its_memory() {
        let mut mapping = CpuMapping::owned(vec![0u8; 8].into_boxed_slice());
        mapping.bytes_mut()[2] = 7;
        assert_eq!(mapping.bytes()[2], 7);
        assert_eq!(mapping.into_owned().unwrap()[2], 7);
        let mut memory = vec![1u8; 4];
        let ptr = core::ptr::NonNull::new(memory.as_mut_ptr()).unwrap();
        // SAFETY: `memory` lives past the mapping and is not touched while it does.
        let mut raw = unsafe { CpuMapping::from_raw(ptr, 4) };
        raw.bytes_mut()[0] = 9;
        assert!(raw.into_owned().is_none());
        assert_eq!(memory, [9, 1, 1, 1]);
        let empty = CpuMapping::owned(Vec::new().into_boxed_slice());
        assert!(empty.bytes().is_empty());
    }
}
