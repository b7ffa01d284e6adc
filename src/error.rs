//! Errors: see [`Error`].

use core::fmt;

/// What the application did wrong (R-E1's application error), for diagnostics and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AppError {
    /// The handle names no live object: it was destroyed, or never existed.
    StaleHandle,
    /// The handle was made by another device.
    WrongDevice,
    /// The handle names an object of another type.
    WrongType,
    /// The object was already destroyed.
    DoubleDestroy,
    /// A view was created on a resource that is not live.
    MissingDependency,
    /// A primary was destroyed through the free-threaded path, or an ordinary object through
    /// the primary path (R-P1).
    PrimaryMismatch,
    /// The command list is not executable: it was destroyed, or came from another device
    /// (R-R8).
    CommandListNotExecutable,
    /// The command list maps a resource the executing context has mapped (R-C4).
    MapConflict,
    /// The command list begins or ends a query that the executing context began (R-C4).
    QueryConflict,
    /// The call does not fit the object's state (e.g. unmapping what is not mapped).
    InvalidState,
    /// An argument is out of range (an offset past a resource's end, an empty payload...).
    OutOfRange,
    /// Present or Blt on a resource that is not a 2D texture in a display-mode format
    /// (R-X7).
    NotDisplayFormat,
    /// A Blt source without the present bind flag, or a destination without the render
    /// target one (R-X7).
    BadBindFlags,
    /// Resources whose identities cannot rotate: the same resource twice, different
    /// descriptions, one mapped (R-X5).
    NotRotatable,
    /// DestroyDevice while deferred contexts of the device are alive: their context-local
    /// handles must close before the objects behind them are destroyed (R-H2).
    DeferredContextsAlive,
    /// A Map the resource, the context or the driver's caps do not allow: DISCARD of a
    /// resource that is not dynamic (R-M1); NO_OVERWRITE of a texture, of a resource that is
    /// not dynamic or of a buffer bound in a way the driver's [`crate::MapCaps`] leave out
    /// (R-M3); READ, WRITE or READ_WRITE on a deferred context, or of a resource that is not
    /// staging (R-M1). The one answer for "this resource cannot be mapped this way".
    /// `E_INVALIDARG` at the API.
    NotMappable,
    /// Map(NO_OVERWRITE) on a deferred context without a Map(DISCARD) of the resource earlier
    /// in the same recording (R-M2): `D3D11_ERROR_DEFERRED_CONTEXT_MAP_WITHOUT_INITIAL_DISCARD`
    /// at the API.
    MapWithoutDiscard,
}

impl AppError {
    /// What went wrong, in a few words, and the rule the refusal enforces.
    pub fn explain(self) -> (&'static str, &'static str) {
        match self {
            AppError::StaleHandle => ("a handle of an object destroyed or never made", "R-E1"),
            AppError::WrongDevice => ("a handle made by another device", "R-E1"),
            AppError::WrongType => ("a handle of another object type", "R-E1"),
            AppError::DoubleDestroy => ("an object destroyed twice", "R-E1"),
            AppError::MissingDependency => ("a view of a resource that is not live", "R-H3"),
            AppError::PrimaryMismatch => (
                "a primary through the free-threaded path, or another object through the \
                 primary one",
                "R-P1",
            ),
            AppError::CommandListNotExecutable => {
                ("a command list that is not executable here", "R-R8")
            }
            AppError::MapConflict => (
                "a command list mapping a resource the executing context has mapped",
                "R-C4",
            ),
            AppError::QueryConflict => (
                "a command list beginning or ending a query the executing context began",
                "R-C4",
            ),
            AppError::InvalidState => ("a call that does not fit the object's state", "R-E1"),
            AppError::OutOfRange => ("an argument out of range", "R-E1"),
            AppError::NotDisplayFormat => (
                "a resource that is not a 2D texture in a display format",
                "R-X7",
            ),
            AppError::BadBindFlags => (
                "a Blt source without the present bind flag, or a destination without the \
                 render-target one",
                "R-X7",
            ),
            AppError::NotRotatable => ("resources whose identities cannot rotate", "R-X5"),
            AppError::DeferredContextsAlive => {
                ("DestroyDevice while deferred contexts are alive", "R-H2")
            }
            AppError::NotMappable => (
                "a Map the resource, the context or the driver's caps do not allow",
                "R-M1",
            ),
            AppError::MapWithoutDiscard => (
                "a Map(NO_OVERWRITE) on a deferred context with no Map(DISCARD) of the \
                 resource earlier in its recording",
                "R-M2",
            ),
        }
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, rule) = self.explain();
        write!(f, "{what} ({self:?}, {rule})")
    }
}

/// One error type for the whole engine, keeping R-E1's split: whose fault is it?
///
/// - [`Error::Application`]: the application broke the API contract (a stale handle, a
///   double destroy, a command list executed after its destroy...). The debug layer would
///   blame the application (`D3DDDIERR_APPLICATIONERROR`).
/// - [`Error::InvalidArg`]: the driver broke the protocol (a context-local handle size it did
///   not list, a malformed table). The debug layer would blame the driver (`E_INVALIDARG`).
/// - [`Error::OutOfMemory`] and [`Error::DeviceRemoved`]: resource exhaustion and device loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// Memory (a context's budget, a kernel allocation, a pool) ran out (R-E3, R-R3).
    OutOfMemory,
    /// The driver broke the protocol: `E_INVALIDARG` (R-E1).
    InvalidArg,
    /// The application broke the API contract: `D3DDDIERR_APPLICATIONERROR` (R-E1).
    Application(AppError),
    /// The device was removed or destroyed.
    DeviceRemoved,
    /// The driver or kernel does not implement what was asked (a hook or callback left at
    /// its default): `DXGI_DDI_ERR_UNSUPPORTED` / `E_NOTIMPL`.
    Unsupported,
    /// A staging Map with [`crate::MapFlags::DO_NOT_WAIT`] of a resource a buffer the GPU has
    /// not finished still uses (R-M4): nothing was waited for and nothing mapped; the open
    /// buffer was flushed if it used the resource, so that polling makes progress.
    /// `DXGI_ERROR_WAS_STILL_DRAWING`.
    WasStillDrawing,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::OutOfMemory => f.write_str("out of memory (R-E3)"),
            Error::InvalidArg => {
                f.write_str("invalid argument: the driver broke the protocol (R-E1)")
            }
            Error::Application(kind) => write!(f, "application error: {kind}"),
            Error::DeviceRemoved => f.write_str("device removed or destroyed (R-D3)"),
            Error::Unsupported => f.write_str("unsupported by the driver or kernel"),
            Error::WasStillDrawing => f.write_str("the GPU still uses the resource (R-M4)"),
        }
    }
}

impl std::error::Error for Error {}

impl From<AppError> for Error {
    fn from(kind: AppError) -> Self {
        Error::Application(kind)
    }
}
