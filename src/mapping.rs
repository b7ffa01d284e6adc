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
        /// answers [`crate::Kernel::persistent_locks`] with `true` (R-M3..R-M5). A staging
        /// resource's persistent lock comes without `READ_ONLY` and `WRITE_ONLY` (it serves
        /// every later Map of the resource); a dynamic buffer's keeps `WRITE_ONLY`.
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
///
/// Two words either way (a pointer, and a length that also says whose the bytes are), so
/// that the immediate context moves a mapping between a resource, a Map and its rename pool
/// in two stores.
pub struct CpuMapping {
    ptr: NonNull<u8>,
    /// The length in bytes, with [`OWNED`] set where `ptr` and the length are a `Box<[u8]>`
    /// the mapping owns (made by `owned`, given back by `into_owned` or dropped with the
    /// mapping), clear for the kernel's memory. The bit is free in every length: a slice
    /// never spans more than `isize::MAX` bytes.
    len_owned: usize,
}

/// [`CpuMapping::len_owned`]'s top bit: a box the mapping owns.
const OWNED: usize = 1 << (usize::BITS - 1);

impl core::fmt::Debug for CpuMapping {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CpuMapping")
            .field("len", &self.len())
            .field("owned", &self.is_owned())
            .finish_non_exhaustive()
    }
}

// SAFETY: the bytes are either owned (a `Box<[u8]>`, `Send`) or the kernel's memory, which
// `from_raw`'s caller promised is the mapping's alone until its unlock, wherever that runs.
unsafe impl Send for CpuMapping {}

impl CpuMapping {
    /// A mapping of memory it owns.
    pub fn owned(bytes: Box<[u8]>) -> Self {
        let len = bytes.len();
        let ptr = NonNull::new(Box::into_raw(bytes).cast::<u8>()).expect("a box is never null");
        CpuMapping {
            ptr,
            len_owned: len | OWNED,
        }
    }

    /// A mapping of the kernel's memory at `ptr`, `len` bytes.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` bytes, which are initialised (memory the
    /// kernel mapped, or the GPU or the driver wrote, is; memory fresh from an allocator that
    /// nobody wrote is not: the engine hands these bytes to the application as they are), and
    /// nothing else reads or writes them (nor frees them) until the kernel's
    /// [`crate::Kernel::unlock`] for this mapping has begun. As for any slice, `len` is at
    /// most `isize::MAX`.
    pub unsafe fn from_raw(ptr: NonNull<u8>, len: usize) -> Self {
        debug_assert!(len & OWNED == 0, "a slice spans at most isize::MAX bytes");
        CpuMapping {
            ptr,
            len_owned: len & !OWNED,
        }
    }

    /// The length in bytes.
    #[inline]
    fn len(&self) -> usize {
        self.len_owned & !OWNED
    }

    /// Whether the bytes are a box the mapping owns.
    #[inline]
    fn is_owned(&self) -> bool {
        self.len_owned & OWNED != 0
    }

    /// The bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: owned, `ptr` and `len` are the box the mapping holds until it drops;
        // otherwise the kernel's memory, valid for `len` bytes and the mapping's alone until
        // its unlock (`from_raw`'s contract). `&self` keeps it from being written through
        // this mapping meanwhile.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len()) }
    }

    /// The bytes, to write.
    #[inline]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only reference.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len()) }
    }

    /// The owned memory back (a kernel that copies it back at the unlock), or `None` for the
    /// kernel's own.
    pub fn into_owned(self) -> Option<Box<[u8]>> {
        let mapping = core::mem::ManuallyDrop::new(self);
        mapping.is_owned().then(|| {
            let slice = core::ptr::slice_from_raw_parts_mut(mapping.ptr.as_ptr(), mapping.len());
            // SAFETY: owned, `ptr` and `len` came from `Box::into_raw` of this very box in
            // `owned`, and the mapping (not dropped: `ManuallyDrop`) gives it up here.
            unsafe { Box::from_raw(slice) }
        })
    }
}

impl Drop for CpuMapping {
    fn drop(&mut self) {
        if self.is_owned() {
            let slice = core::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len());
            // SAFETY: as in `into_owned`: the box `owned` gave up, freed once, here.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CpuMapping;

    /// A mapping shows its length and whose memory it is, not its bytes or address.
    #[test]
    fn a_mapping_debug_prints_its_length_and_owner() {
        let owned = CpuMapping::owned(vec![0u8; 8].into_boxed_slice());
        assert_eq!(
            format!("{owned:?}"),
            "CpuMapping { len: 8, owned: true, .. }"
        );
        let mut memory = [0u8; 4];
        let ptr = core::ptr::NonNull::new(memory.as_mut_ptr()).unwrap();
        // SAFETY: `memory` outlives the mapping and is reached through it alone meanwhile.
        let raw = unsafe { CpuMapping::from_raw(ptr, memory.len()) };
        assert_eq!(
            format!("{raw:?}"),
            "CpuMapping { len: 4, owned: false, .. }"
        );
    }

    /// Two words, and as an `Option` too (the pointer's niche): what a move between a
    /// resource, a Map and the rename pool copies.
    #[test]
    fn a_mapping_is_two_words() {
        let word = core::mem::size_of::<usize>();
        assert_eq!(core::mem::size_of::<CpuMapping>(), 2 * word);
        assert_eq!(core::mem::size_of::<Option<CpuMapping>>(), 2 * word);
    }

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
