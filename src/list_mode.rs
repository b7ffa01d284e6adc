//! Who records a deferred context's calls and who performs them: see [`ListMode`].

/// How a device's command lists are made and executed: decided once, at device creation,
/// from the driver's caps ([`crate::ThreadingCaps::COMMANDLISTS`]) and
/// [`crate::Driver::builds_command_lists`]; [`crate::Device::list_mode`] tells it.
///
/// | mode | on the deferred context's thread | at CommandListExecute, on the immediate context's thread |
/// |---|---|---|
/// | `Emulated` | the engine records; no driver hook | the engine replays every operation through [`crate::Driver::execute`], between two [`crate::Op::ClearState`]s |
/// | `Replayed` | the engine records; the driver hears every call ([`crate::Driver::record_deferred`]) | [`crate::Driver::execute_command_list`], then every operation through [`crate::Driver::execute`], then [`crate::Op::ClearState`] |
/// | `DriverBuilt` | the driver hears every call and builds the list; the engine keeps holds, R-C4's sets, the bindings, budget and replay counts | [`crate::Driver::execute_command_list`] alone: the driver's whole job, whatever the list's length |
///
/// In every mode the engine checks R-R8 and R-C4 before anything runs, stamps every object
/// a list holds with the executing buffer (R-D1), answers the state-refresh queries of R-C3
/// and keeps a list's holds while it can run (R-H2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ListMode {
    /// The driver has no command lists (its caps lack `COMMANDLISTS`): the engine emulates
    /// deferred contexts, as the D3D11 runtime does, and calls no deferred-context or
    /// command-list hook.
    Emulated,
    /// The driver has command lists and the engine replays them: the driver hears every
    /// recorded call on the recording thread, and the list's operations reach it again
    /// through [`crate::Driver::execute`] on the immediate context.
    Replayed,
    /// The driver builds its command lists itself on the recording thread
    /// ([`crate::Driver::builds_command_lists`]): executing one is one
    /// [`crate::Driver::execute_command_list`], and none of its operations reaches
    /// [`crate::Driver::execute`].
    DriverBuilt,
}

impl ListMode {
    /// Every mode.
    pub const ALL: [ListMode; 3] = [
        ListMode::Emulated,
        ListMode::Replayed,
        ListMode::DriverBuilt,
    ];

    /// Whether the driver hears deferred-context calls and owns list memory (every mode but
    /// [`ListMode::Emulated`]).
    pub fn has_driver_lists(self) -> bool {
        self != ListMode::Emulated
    }

    /// Whether the engine keeps a list's operations to replay them
    /// ([`ListMode::Emulated`] and [`ListMode::Replayed`]).
    pub fn replays(self) -> bool {
        self != ListMode::DriverBuilt
    }
}
