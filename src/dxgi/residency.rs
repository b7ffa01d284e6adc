//! QueryResourceResidency (R-X4): statuses and how they fold.

/// Where one allocation is (`D3DDDI_RESIDENCYSTATUS`, the same numbers as
/// `DXGI_DDI_RESIDENCY`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum ResidencyStatus {
    /// In GPU memory.
    #[default]
    GpuMemory = 1,
    /// In memory the GPU reaches through the system (shared memory).
    SharedMemory = 2,
    /// Not resident (evicted).
    NotResident = 3,
}

impl ResidencyStatus {
    /// The status a raw `D3DDDI_RESIDENCYSTATUS` names; `None` outside 1..=3.
    pub fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            1 => ResidencyStatus::GpuMemory,
            2 => ResidencyStatus::SharedMemory,
            3 => ResidencyStatus::NotResident,
            _ => return None,
        })
    }
}

/// A fold of statuses, worst wins (R-X4): not resident if any is, else in shared memory if
/// any is, else resident. Per resource over its allocations, and over all resources.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResidencyFold {
    /// Every allocation in GPU memory: `S_OK`.
    #[default]
    Resident,
    /// Some in shared memory, none evicted: `S_RESIDENT_IN_SHARED_MEMORY`.
    SharedMemory,
    /// Some evicted: `S_NOT_RESIDENT`.
    NotResident,
}

/// `S_RESIDENT_IN_SHARED_MEMORY` (`MAKE_D3DSTATUS(2166)`).
pub const S_RESIDENT_IN_SHARED_MEMORY: i32 = 0x0876_0876;
/// `S_NOT_RESIDENT` (`MAKE_D3DSTATUS(2165)`).
pub const S_NOT_RESIDENT: i32 = 0x0876_0875;

impl ResidencyFold {
    /// The fold of one status.
    pub const fn of(status: ResidencyStatus) -> Self {
        match status {
            ResidencyStatus::GpuMemory => ResidencyFold::Resident,
            ResidencyStatus::SharedMemory => ResidencyFold::SharedMemory,
            ResidencyStatus::NotResident => ResidencyFold::NotResident,
        }
    }

    /// The fold of `statuses` (resident when there are none).
    pub fn fold(statuses: impl IntoIterator<Item = ResidencyStatus>) -> Self {
        statuses
            .into_iter()
            .map(ResidencyFold::of)
            .max()
            .unwrap_or(ResidencyFold::Resident)
    }

    /// The status of a resource folded to this (`DXGI_DDI_RESIDENCY`).
    pub const fn status(self) -> ResidencyStatus {
        match self {
            ResidencyFold::Resident => ResidencyStatus::GpuMemory,
            ResidencyFold::SharedMemory => ResidencyStatus::SharedMemory,
            ResidencyFold::NotResident => ResidencyStatus::NotResident,
        }
    }

    /// The `HRESULT` QueryResourceResidency returns: `S_OK` (0), `0x08760876` or
    /// `0x08760875`.
    pub const fn hresult(self) -> i32 {
        match self {
            ResidencyFold::Resident => 0,
            ResidencyFold::SharedMemory => S_RESIDENT_IN_SHARED_MEMORY,
            ResidencyFold::NotResident => S_NOT_RESIDENT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ResidencyStatus::*;

    /// R-X4's whole truth table over two allocations.
    #[test]
    fn r_x4_fold_worst_wins() {
        let all = [GpuMemory, SharedMemory, NotResident];
        for a in all {
            for b in all {
                let expected = if a == NotResident || b == NotResident {
                    S_NOT_RESIDENT
                } else if a == SharedMemory || b == SharedMemory {
                    S_RESIDENT_IN_SHARED_MEMORY
                } else {
                    0
                };
                assert_eq!(
                    ResidencyFold::fold([a, b]).hresult(),
                    expected,
                    "{a:?} {b:?}"
                );
            }
        }
        assert_eq!(ResidencyFold::fold([]), ResidencyFold::Resident);
        assert_eq!(ResidencyStatus::from_raw(4), None);
    }
}
