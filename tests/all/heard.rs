//! Every check before the driver hears the call: a call a deferred context refuses (R-C4's
//! map and query conflicts, the budget and the replay limit of R-E3, a query begun twice, a
//! second Map, an Unmap of what is not mapped, a destroyed, foreign or mistyped object, an
//! update out of range) reaches none of the driver's recording hooks
//! (`Driver::record_deferred`, `execute_command_list_deferred`, `map_discard_deferred`).
//! A driver that heard such a call would have recorded it into its list, or chained a list,
//! that the engine then says never happened. Each case runs where the engine replays lists
//! and where the driver builds them.

use std::sync::Arc;

use cmdlist::handle::{Query, Resource};
use cmdlist::soft::{
    self, Gpu, Hook, SoftCommand, SoftCommandList, SoftConfig, SoftDeferredContext, SoftDevice,
    SoftImmediate, SoftWorld, TraceEvent,
};
use cmdlist::{AppError, BindClass, BindPoint, DeviceConfig, Error, Handle, QueryKind};

use crate::common::{app, buffer, dynamic_buffer, forge};

const RT0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);
const RT1: BindPoint = BindPoint::new(BindClass::RenderTarget, 1);

/// The hooks through which a driver records what a deferred context does.
const RECORDING: [Hook; 3] = [
    Hook::RecordDeferred,
    Hook::ExecuteCommandListDeferred,
    Hook::MapDiscardDeferred,
];

/// A device whose soft driver has command lists (replayed by the engine, or built by the
/// driver), a deferred context, a plain buffer `a`, a dynamic buffer `d`, an event query `q`.
struct Fixture {
    device: SoftDevice,
    ic: SoftImmediate,
    world: Arc<SoftWorld>,
    dc: SoftDeferredContext,
    a: Handle<Resource>,
    d: Handle<Resource>,
    q: Handle<Query>,
    /// The trace's length when the refused call began.
    mark: usize,
}

impl Fixture {
    fn new(driver_built: bool, config: DeviceConfig) -> Self {
        let soft_config = SoftConfig {
            gpu: Gpu::Immediate,
            command_lists: true,
            driver_built,
            ..SoftConfig::from_env().unwrap()
        };
        let (device, ic, world) = soft::device(soft_config, config).unwrap();
        let a = device.create_resource(buffer(8)).unwrap();
        let d = device.create_resource(dynamic_buffer(8)).unwrap();
        let q = device.create_query(QueryKind::Event).unwrap();
        let dc = device.create_deferred_context().unwrap();
        Fixture {
            device,
            ic,
            world,
            dc,
            a,
            d,
            q,
            mark: 0,
        }
    }

    /// Marks where the refused call begins.
    fn mark(&mut self) {
        self.mark = self.world.trace().len();
    }

    /// The recording hooks heard for the context since the mark.
    fn heard(&self) -> Vec<TraceEvent> {
        let id = self.dc.id();
        self.world.trace()[self.mark..]
            .iter()
            .filter(|e| e.context == Some(id) && RECORDING.contains(&e.hook))
            .cloned()
            .collect()
    }

    /// A list recorded by `record` on another deferred context.
    fn list(&self, record: impl FnOnce(&mut SoftDeferredContext)) -> SoftCommandList {
        let mut other = self.device.create_deferred_context().unwrap();
        record(&mut other);
        other.finish().unwrap()
    }

    /// Abandons the recording, destroys the device and checks the world clean.
    fn end(self) {
        let Fixture {
            mut ic,
            world,
            mut dc,
            device,
            ..
        } = self;
        let _ = dc.abandon();
        drop((dc, device));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// Runs `case` in both list modes, and asserts that the call it makes after its mark fails
/// with `expected` and that the driver heard nothing of it.
fn refused(
    name: &str,
    config: DeviceConfig,
    expected: Error,
    case: impl Fn(&mut Fixture) -> cmdlist::Result<()>,
) {
    for driver_built in [false, true] {
        let mut f = Fixture::new(driver_built, config.clone());
        let result = case(&mut f);
        assert_eq!(result, Err(expected), "{name}, driver-built {driver_built}");
        let heard = f.heard();
        assert!(
            heard.is_empty(),
            "{name}, driver-built {driver_built}: the driver heard a refused call: {heard:#?}"
        );
        f.end();
    }
}

/// R-C4: executing a list that maps a resource mapped on the executing context, or begins
/// or ends a query begun there, is refused before the driver chains the list
/// (`execute_command_list_deferred`), by the plain and the restoring execute alike; the
/// refusal leaves the context's bindings as they were.
#[test]
fn r_c4_a_conflicting_nested_execute_is_refused_before_the_driver_hears_it() {
    for restoring in [false, true] {
        let execute = |f: &mut Fixture, list: &SoftCommandList| {
            f.mark();
            let result = match restoring {
                false => f.dc.execute_command_list(list),
                true => f.dc.execute_command_list_restoring(list),
            };
            assert_eq!(f.dc.binding(RT0), Some(f.a.any()), "still bound");
            result
        };
        let name = format!("a Map conflict, restoring {restoring}");
        refused(
            &name,
            DeviceConfig::default(),
            app(AppError::MapConflict),
            |f| {
                let d = f.d;
                let list = f.list(|dc| {
                    dc.map_discard(d).unwrap().fill(1);
                    dc.unmap(d).unwrap();
                });
                f.dc.bind(RT0, Some(f.a.any()))?;
                f.dc.map_discard(d)?;
                execute(f, &list)
            },
        );
        let name = format!("a query conflict, restoring {restoring}");
        refused(
            &name,
            DeviceConfig::default(),
            app(AppError::QueryConflict),
            |f| {
                let q = f.q;
                let list = f.list(|dc| dc.end_query(q).unwrap());
                f.dc.bind(RT0, Some(f.a.any()))?;
                f.dc.begin_query(q)?;
                execute(f, &list)
            },
        );
    }
}

/// R-E3: a restoring execute reserves its execute, the list's replayed operations and every
/// re-bind before the driver hears any of them. At the exact replay limit it is accepted
/// (one execute and two re-binds heard); one below, it is refused out of memory with nothing
/// heard.
#[test]
fn r_e3_a_restoring_execute_at_the_replay_limit_is_refused_before_the_driver_hears_it() {
    let inner_ops = 3u64;
    // The recording replays: its 2 binds, the execute, the inner list's 3 operations, and
    // the 2 re-binds after it (one per binding in force).
    let limit = 2 + 1 + inner_ops + 2;
    let case = |f: &mut Fixture| {
        let (a, d) = (f.a, f.d);
        let list = f.list(|dc| {
            for value in 0..inner_ops as u8 {
                dc.command(SoftCommand::Fill { dst: a, value }).unwrap();
            }
        });
        assert_eq!(list.stats().operations as u64, inner_ops);
        f.dc.bind(RT0, Some(a.any()))?;
        f.dc.bind(RT1, Some(d.any()))?;
        assert_eq!(f.dc.stats().operations, 2);
        f.mark();
        f.dc.execute_command_list_restoring(&list)
    };
    // At the limit: accepted, and heard as one execute and two binds.
    for driver_built in [false, true] {
        let config = DeviceConfig::default().with_replay_limit(limit);
        let mut f = Fixture::new(driver_built, config);
        assert_eq!(case(&mut f), Ok(()), "driver-built {driver_built}");
        let heard: Vec<Hook> = f.heard().iter().map(|e| e.hook).collect();
        assert_eq!(
            heard,
            [
                Hook::ExecuteCommandListDeferred,
                Hook::RecordDeferred,
                Hook::RecordDeferred
            ],
            "driver-built {driver_built}"
        );
        assert_eq!(
            f.dc.stats().operations,
            5,
            "2 binds, the execute, 2 re-binds"
        );
        f.end();
    }
    // One below: refused, nothing heard.
    refused(
        "one below the replay limit",
        DeviceConfig::default().with_replay_limit(limit - 1),
        Error::OutOfMemory,
        case,
    );
}

/// A Begin of a query begun already is refused before the driver hears it.
#[test]
fn r_c4_a_query_begun_twice_is_refused_before_the_driver_hears_it() {
    refused(
        "BeginQuery of a begun query",
        DeviceConfig::default(),
        app(AppError::InvalidState),
        |f| {
            f.dc.begin_query(f.q)?;
            f.mark();
            f.dc.begin_query(f.q)
        },
    );
}

type Case = fn(&mut Fixture) -> cmdlist::Result<()>;

/// Every other call the engine refuses, each before the driver hears it: the refusal and
/// the setting it needs.
#[test]
fn r_e1_r_e3_every_refused_call_is_refused_before_the_driver_hears_it() {
    let default = DeviceConfig::default();
    let cases: [(&str, DeviceConfig, Error, Case); 20] = [
        (
            "a second Map",
            default.clone(),
            app(AppError::InvalidState),
            |f| {
                f.dc.map_discard(f.d)?;
                f.mark();
                f.dc.map_discard(f.d).map(drop)
            },
        ),
        (
            "an Unmap of what is not mapped",
            default.clone(),
            app(AppError::InvalidState),
            |f| {
                f.mark();
                f.dc.unmap(f.d)
            },
        ),
        (
            "a Map of a resource that is not dynamic",
            default.clone(),
            app(AppError::NotMappable),
            |f| {
                f.mark();
                f.dc.map_discard(f.a).map(drop)
            },
        ),
        (
            "a command naming a destroyed resource",
            default.clone(),
            app(AppError::StaleHandle),
            |f| {
                f.device.destroy(f.a)?;
                f.mark();
                f.dc.command(SoftCommand::Fill { dst: f.a, value: 1 })
            },
        ),
        (
            "an update of a destroyed resource",
            default.clone(),
            app(AppError::StaleHandle),
            |f| {
                f.device.destroy(f.a)?;
                f.mark();
                f.dc.update(f.a, 0, &[1])
            },
        ),
        (
            "a bind of a destroyed resource",
            default.clone(),
            app(AppError::StaleHandle),
            |f| {
                f.device.destroy(f.a)?;
                f.mark();
                f.dc.bind(RT0, Some(f.a.any()))
            },
        ),
        (
            "a Begin of a destroyed query",
            default.clone(),
            app(AppError::StaleHandle),
            |f| {
                f.device.destroy(f.q)?;
                f.mark();
                f.dc.begin_query(f.q)
            },
        ),
        (
            "an update of a query as a resource",
            default.clone(),
            app(AppError::WrongType),
            |f| {
                f.mark();
                f.dc.update(forge(f.q), 0, &[1])
            },
        ),
        (
            "a Begin of a resource as a query",
            default.clone(),
            app(AppError::WrongType),
            |f| {
                f.mark();
                f.dc.begin_query(forge(f.a))
            },
        ),
        // The same refusals for objects whose handles are open in the recording already:
        // found in the context's own table, without the registry, and checked the same.
        (
            "a Begin of a resource, open in this recording, as a query",
            default.clone(),
            app(AppError::WrongType),
            |f| {
                f.dc.command(SoftCommand::Fill { dst: f.a, value: 1 })?;
                f.mark();
                f.dc.begin_query(forge(f.a))
            },
        ),
        (
            "an update of a query, open in this recording, as a resource",
            default.clone(),
            app(AppError::WrongType),
            |f| {
                f.dc.begin_query(f.q)?;
                f.mark();
                f.dc.update(forge(f.q), 0, &[1])
            },
        ),
        (
            "an update of a resource destroyed while open in this recording",
            default.clone(),
            app(AppError::StaleHandle),
            |f| {
                f.dc.command(SoftCommand::Fill { dst: f.a, value: 1 })?;
                f.device.destroy(f.a)?;
                f.mark();
                f.dc.update(f.a, 0, &[1])
            },
        ),
        (
            // Stale before anything else about the resource, as the registry answers.
            "a Map of a non-dynamic resource destroyed while open in this recording",
            default.clone(),
            app(AppError::StaleHandle),
            |f| {
                f.dc.command(SoftCommand::Fill { dst: f.a, value: 1 })?;
                f.device.destroy(f.a)?;
                f.mark();
                f.dc.map_discard(f.a).map(|_| ())
            },
        ),
        (
            "a command naming a resource destroyed while open in this recording",
            default.clone(),
            app(AppError::StaleHandle),
            |f| {
                f.dc.command(SoftCommand::Fill { dst: f.a, value: 1 })?;
                f.device.destroy(f.a)?;
                f.mark();
                f.dc.command(SoftCommand::Fill { dst: f.a, value: 2 })
            },
        ),
        (
            "a command naming another device's resource",
            default.clone(),
            app(AppError::WrongDevice),
            |f| {
                let (other, mut other_ic, other_world) =
                    soft::device(SoftConfig::from_env().unwrap(), DeviceConfig::default()).unwrap();
                let foreign = other.create_resource(buffer(8)).unwrap();
                f.mark();
                let result = f.dc.command(SoftCommand::Fill {
                    dst: foreign,
                    value: 1,
                });
                drop(other);
                other_ic.destroy_device().unwrap();
                other_world.assert_clean();
                result
            },
        ),
        (
            "an execute of another device's list",
            default.clone(),
            app(AppError::CommandListNotExecutable),
            |f| {
                let config = SoftConfig {
                    command_lists: true,
                    ..SoftConfig::from_env().unwrap()
                };
                let (other, mut other_ic, other_world) =
                    soft::device(config, DeviceConfig::default()).unwrap();
                let mut other_dc = other.create_deferred_context().unwrap();
                let foreign = other_dc.finish().unwrap();
                f.mark();
                let result = f.dc.execute_command_list(&foreign);
                drop((foreign, other_dc, other));
                other_ic.destroy_device().unwrap();
                other_world.assert_clean();
                result
            },
        ),
        (
            "an update past the resource's end",
            default.clone(),
            app(AppError::OutOfRange),
            |f| {
                f.mark();
                f.dc.update(f.a, 6, &[1; 4])
            },
        ),
        (
            "an update over the context's budget",
            default.clone().with_deferred_budget(1024),
            Error::OutOfMemory,
            |f| {
                let big = f.device.create_resource(buffer(4096))?;
                f.mark();
                f.dc.update(big, 0, &[1; 2048])
            },
        ),
        (
            "a command past the replay limit",
            default.clone().with_replay_limit(2),
            Error::OutOfMemory,
            |f| {
                f.dc.command(SoftCommand::Fill { dst: f.a, value: 1 })?;
                f.dc.command(SoftCommand::Fill { dst: f.a, value: 2 })?;
                f.mark();
                f.dc.command(SoftCommand::Fill { dst: f.a, value: 3 })
            },
        ),
        (
            "an execute past the replay limit (1 operation + the execute + 3 replayed)",
            default.clone().with_replay_limit(4),
            Error::OutOfMemory,
            |f| {
                let a = f.a;
                let list = f.list(|dc| {
                    for value in 0..3 {
                        dc.command(SoftCommand::Fill { dst: a, value }).unwrap();
                    }
                });
                f.dc.command(SoftCommand::Fill { dst: a, value: 9 })?;
                f.mark();
                f.dc.execute_command_list(&list)
            },
        ),
    ];
    for (name, config, expected, case) in cases {
        refused(name, config, expected, case);
    }
}

/// R-C4 at depth: a list whose nested list maps a resource mapped on the executing context
/// is refused before the driver hears the execute.
#[test]
fn r_c4_a_conflict_in_a_nested_lists_nested_list_is_refused_before_the_driver_hears_it() {
    refused(
        "a Map conflict one list down",
        DeviceConfig::default(),
        app(AppError::MapConflict),
        |f| {
            let d = f.d;
            let inner = f.list(|dc| {
                dc.map_discard(d).unwrap().fill(1);
                dc.unmap(d).unwrap();
            });
            let outer = f.list(|dc| dc.execute_command_list(&inner).unwrap());
            f.dc.map_discard(d)?;
            f.mark();
            f.dc.execute_command_list(&outer)
        },
    );
}
