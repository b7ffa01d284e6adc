//! Capabilities the driver reports: threading (`D3D11DDI_THREADING_CAPS`, R-F1) and the
//! Map types beyond D3D11.0's (`D3D11_FEATURE_DATA_D3D11_OPTIONS`, R-M3).

use bitflags::bitflags;

use crate::error::{Error, Result};

bitflags! {
    /// The driver's threading caps. Values from outside are taken with
    /// [`ThreadingCaps::from_bits_retain`] so that unknown bits survive a round trip;
    /// [`ThreadingCaps::validate`] checks the documented dependency.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct ThreadingCaps: u32 {
        /// `D3D11DDICAPS_FREETHREADED`: Create*, Open*, Destroy*, CalcPrivate* and Check*
        /// entry points may be entered by several threads at once, and are fixed (R-F1).
        const FREETHREADED = 0x1;
        /// `D3D11DDICAPS_COMMANDLISTS`: the driver records deferred contexts itself.
        const COMMANDLISTS = 0x2;
        /// `D3D11DDICAPS_COMMANDLISTS_BUILD_2`: the driver supports the recycle hooks
        /// (R-R1..R-R7); requires [`ThreadingCaps::COMMANDLISTS`].
        const COMMANDLISTS_BUILD_2 = 0x4;
    }
}

bitflags! {
    /// How the driver serves the Map types: which dynamic buffers beyond vertex and index
    /// buffers take Map(NO_OVERWRITE) (R-M3), the D3D11.1 options a driver reports in
    /// `D3D11_FEATURE_DATA_D3D11_OPTIONS`; and whether a Map(DISCARD) on the immediate
    /// context renames (R-M5). Asked once, at device creation ([`crate::Driver::map_caps`]).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct MapCaps: u32 {
        /// `MapNoOverwriteOnDynamicConstantBuffer`: dynamic constant buffers too.
        const NO_OVERWRITE_CONSTANT_BUFFER = 0x1;
        /// `MapNoOverwriteOnDynamicBufferSRV`: dynamic buffers bound as shader resources too.
        const NO_OVERWRITE_BUFFER_SRV = 0x2;
        /// Not a D3D option: a resource's bytes are its kernel allocation, from byte 0, so
        /// that a Map(DISCARD) on the immediate context may hand out another allocation of
        /// the same size and make it the resource's (R-M5), with no copy through the
        /// engine. The driver reads [`crate::ObjectView::allocation`] when it uses a
        /// resource and hears each rename ([`crate::Driver::renamed`]); the kernel serves
        /// [`crate::Kernel::lock`]. Without it, the Map's bytes reach the driver at the Unmap
        /// ([`crate::Op::WriteDiscard`]).
        ///
        /// A driver that builds its own lists ([`crate::ListMode::DriverBuilt`]) and declares
        /// this must patch its lists at execute: a rename on the immediate context after a
        /// list looked a resource up (while recording, or between two executes) gives the
        /// resource another allocation, and a finished list that still names the old one
        /// reads memory the resource no longer has (the engine keeps it only until the GPU
        /// is done with it). [`crate::Driver::execute_command_list`] reads each resource's
        /// [`crate::ObjectView::allocation`] then and writes it into what the list runs,
        /// as after an identity rotation (R-X5). The soft driver's packets name resources by
        /// handle and resolve them at every execute; the Vulkan driver (`cmdlist-vulkan`)
        /// keeps with each list the allocation each resource had when the list looked it
        /// up, and an execute that finds one moved replays the list from its handle-based
        /// packets instead of running its secondaries.
        const DISCARD_RENAMES = 0x4;
    }
}

impl ThreadingCaps {
    /// Checks that `COMMANDLISTS_BUILD_2` comes with `COMMANDLISTS`; otherwise the driver's
    /// answer is [`Error::InvalidArg`]. Unknown bits are kept, not rejected.
    pub fn validate(self) -> Result<Self> {
        if self.contains(Self::COMMANDLISTS_BUILD_2) && !self.contains(Self::COMMANDLISTS) {
            Err(Error::InvalidArg)
        } else {
            Ok(self)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r_f1_caps_keep_documented_values_and_dependency() {
        assert_eq!(ThreadingCaps::FREETHREADED.bits(), 0x1);
        assert_eq!(ThreadingCaps::COMMANDLISTS.bits(), 0x2);
        assert_eq!(ThreadingCaps::COMMANDLISTS_BUILD_2.bits(), 0x4);
        assert_eq!(
            ThreadingCaps::from_bits_retain(0x4).validate(),
            Err(Error::InvalidArg)
        );
        let with_unknown = ThreadingCaps::from_bits_retain(0x6 | 0x100);
        assert_eq!(with_unknown.validate().unwrap().bits(), 0x106);
    }
}
