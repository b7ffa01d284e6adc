//! The `command_lists` fuzz interpreter (`cmdlist_models::command_lists`) on stable:
//! a few thousand random inputs from a fixed-seed PRNG, plus hand-written sequences. Every
//! step is checked against the interpreter's model (R-C3, R-C4, R-E3, R-H1..R-H5, R-D1).

use cmdlist::soft::{self, SoftCommand, SoftConfig};
use cmdlist::{AppError, DeviceConfig, Error, ListMode, QueryKind, ResourceDesc};
use cmdlist_models::command_lists::{
    self, Burst, Bytes, Close, Cmd, Coverage, DcOp, IcOp, New, Obj, QueryChoice, Step, Timeline,
    ViewKind, DEFAULT_BUDGET,
};

/// Random inputs per run of the stable test (each 64..=1024 bytes).
const INPUTS: u64 = 3000;

/// Names the failing input when a run panics.
struct Report(u64);

impl Drop for Report {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failing input: #{} (see `input_bytes`)", self.0);
        }
    }
}

use crate::common::XorShift;

/// Input number `input` of the random test: 64..=1024 bytes for
/// [`command_lists::run_bytes`] (the same bytes a fuzzer's input would be).
fn input_bytes(input: u64) -> Vec<u8> {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ (input + 1).wrapping_mul(0x1000_0000_01b3));
    let len = 64 + (rng.next() % 961) as usize;
    rng.bytes(len)
}

#[test]
fn r_c3_r_c4_r_c5_r_e3_r_m2_r_x5_command_lists_random_inputs_match_model() {
    let mut total = Coverage::default();
    for input in 0..INPUTS {
        let _report = Report(input);
        total += command_lists::run_bytes(&input_bytes(input));
    }
    println!("{total:#?}");
    // The inputs reach the cases the test is about.
    assert!(total.executed > 100, "{total:#?}");
    assert!(total.executed_with_destroyed > 10, "{total:#?}");
    assert!(
        total.map_conflicts > 0 && total.query_conflicts > 0,
        "{total:#?}"
    );
    assert!(
        total.removals > 50 && total.finish_after_removal > 10,
        "{total:#?}"
    );
    assert!(total.finish_ended_queries > 0, "{total:#?}");
    assert!(
        total.rebinds > 10,
        "bindings kept over a Finish (R-C5): {total:#?}"
    );
    // Rare in random bursts (an append must follow a discard of the same resource, unmapped,
    // in the same recording); `r_m2_a_ring_of_appends_matches_the_model` aims at it.
    assert!(
        total.appends > 0,
        "Map(NO_OVERWRITE)s after a discard (R-M2): {total:#?}"
    );
    assert!(
        total.failed_replays > 0 && total.elsewhere > 100,
        "{total:#?}"
    );
    assert!(
        total.displayed > 100,
        "presents, rotations, Blts: {total:#?}"
    );
    assert!(
        total.nested > 100,
        "lists executed on deferred contexts: {total:#?}"
    );
    assert!(
        (INPUTS / 3..INPUTS * 2 / 3).contains(&total.emulated_runs),
        "about half the runs emulate command lists: {total:#?}"
    );
    assert!(
        (INPUTS / 8..INPUTS * 3 / 8).contains(&total.driver_built_runs),
        "about a quarter of the runs have the driver build its lists: {total:#?}"
    );
}

fn resource(size: u8) -> Step {
    Step::Create(New::Resource { size: size - 1 })
}

fn record(dc: u8, op: DcOp) -> Step {
    Step::Record {
        dc,
        elsewhere: false,
        ops: Burst::one(op),
    }
}

fn finish(dc: u8) -> Step {
    Step::Close {
        dc,
        how: Close::FinishKeep,
    }
}

fn execute(list: u8) -> Step {
    Step::Execute { list, times: 0 }
}

fn ic_write(resource: u8, seed: u8) -> Step {
    Step::Immediate(IcOp::Update {
        resource,
        offset: 0,
        data: Bytes { len: 32, seed },
    })
}

#[test]
fn r_c3_r_c4_list_executed_three_times_replays_its_map_discard_data_between_ic_writes() {
    let mut steps = vec![
        resource(32),
        Step::Create(New::Query {
            kind: QueryChoice::Occlusion,
        }),
        // List 0: Map(DISCARD) of resource 0 with 20 bytes written, and an update after it.
        record(
            0,
            DcOp::MapWrite {
                resource: 0,
                data: Bytes { len: 20, seed: 7 },
            },
        ),
        record(
            0,
            DcOp::Update {
                resource: 0,
                offset: 24,
                data: Bytes { len: 4, seed: 90 },
            },
        ),
        record(0, DcOp::Unmap { resource: 0 }),
        finish(0),
        // List 1: begins and ends query 0.
        record(1, DcOp::BeginQuery { query: 0 }),
        record(1, DcOp::EndQuery { query: 0 }),
        finish(1),
    ];
    for seed in [100, 150, 200] {
        steps.extend([
            ic_write(0, seed),
            execute(0),
            Step::Timeline(Timeline::Flush),
        ]);
    }
    steps.extend([
        // R-C4: mapped on the IC, the list that maps it is refused and changes nothing.
        Step::Immediate(IcOp::Map {
            resource: 0,
            data: Bytes { len: 8, seed: 1 },
        }),
        ic_write(0, 33),
        execute(0),
        Step::Immediate(IcOp::Unmap { resource: 0 }),
        execute(0),
        // R-C4: a query the IC began: the list that begins it is refused until the End.
        Step::Immediate(IcOp::BeginQuery { query: 0 }),
        execute(1),
        Step::Immediate(IcOp::EndQuery { query: 0 }),
        execute(1),
        Step::Timeline(Timeline::CompleteAll),
    ]);
    let cov = command_lists::run_with_budget(DEFAULT_BUDGET, &steps);
    assert_eq!(cov.executed, 5, "{cov:#?}");
    assert_eq!((cov.map_conflicts, cov.query_conflicts), (1, 1), "{cov:#?}");

    // The same bytes, asserted directly.
    let config = SoftConfig {
        trace: false,
        ..SoftConfig::from_env().unwrap()
    };
    let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
    let r = device
        .create_resource(ResourceDesc {
            byte_size: 32,
            usage: cmdlist::Usage::Dynamic,
            ..ResourceDesc::default()
        })
        .unwrap();
    let alloc = device.object(r).unwrap().allocation().unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    dc.map_discard(r).unwrap()[..4].copy_from_slice(&[1, 2, 3, 4]);
    dc.unmap(r).unwrap();
    let list = dc.finish().unwrap();
    let mut expect = vec![0u8; 32];
    expect[..4].copy_from_slice(&[1, 2, 3, 4]);
    for fill in [9u8, 8, 7] {
        ic.update(r, 0, &[fill; 32]).unwrap();
        assert_eq!(world.read(alloc).unwrap(), vec![fill; 32]);
        ic.execute_command_list(&list).unwrap();
        assert_eq!(world.read(alloc).unwrap(), expect);
    }
    ic.map_discard(r).unwrap().fill(5);
    assert_eq!(
        ic.execute_command_list(&list),
        Err(Error::Application(AppError::MapConflict))
    );
    ic.unmap(r).unwrap();
    ic.execute_command_list(&list).unwrap();
    assert_eq!(world.read(alloc).unwrap(), expect);
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// A list that maps the same resource twice, with other writes between, replays each Map's
/// own bytes in its place: the model and the engine, in each list mode, and directly. A
/// replay of the first Map's bytes for both (or of the last for both) differs.
#[test]
fn r_c4_a_resource_mapped_twice_in_a_list_replays_each_maps_bytes_in_place() {
    let steps = vec![
        resource(16),
        resource(16),
        record(
            0,
            DcOp::MapWrite {
                resource: 0,
                data: Bytes { len: 16, seed: 3 },
            },
        ),
        record(0, DcOp::Unmap { resource: 0 }),
        // Resource 1 takes the first contents...
        record(0, DcOp::Command(Cmd::Copy { dst: 1, src: 0 })),
        record(
            0,
            DcOp::MapWrite {
                resource: 0,
                data: Bytes { len: 8, seed: 77 },
            },
        ),
        record(0, DcOp::Unmap { resource: 0 }),
        finish(0),
        ic_write(0, 5),
        execute(0),
        execute(0),
        Step::Timeline(Timeline::CompleteAll),
    ];
    for mode in ListMode::ALL {
        let cov = command_lists::run_in(DEFAULT_BUDGET, mode, &steps);
        assert_eq!(cov.executed, 2, "{mode:?}: {cov:#?}");
    }

    // Directly: the copy between the two Maps sees the first contents, the resource ends
    // with the second.
    let (device, mut ic, world) =
        soft::device(SoftConfig::from_env().unwrap(), DeviceConfig::default()).unwrap();
    let desc = ResourceDesc {
        byte_size: 8,
        usage: cmdlist::Usage::Dynamic,
        ..ResourceDesc::default()
    };
    let (a, b) = (
        device.create_resource(desc).unwrap(),
        device.create_resource(desc).unwrap(),
    );
    let mut dc = device.create_deferred_context().unwrap();
    dc.map_discard(a).unwrap().fill(1);
    dc.unmap(a).unwrap();
    dc.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
    dc.map_discard(a).unwrap()[..4].fill(2);
    dc.unmap(a).unwrap();
    let list = dc.finish().unwrap();
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    let read = |r| {
        world
            .read(device.object(r).unwrap().allocation().unwrap())
            .unwrap()
    };
    assert_eq!(read(b), vec![1; 8], "the first Map's bytes, in its place");
    assert_eq!(
        read(a),
        [2, 2, 2, 2, 0, 0, 0, 0],
        "the second Map's, after it"
    );
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// Nested execution through the interpreter, in both driver modes: an inner list that
/// maps and begins a query, executed by an outer list on another context, dropped before
/// the outer one runs, with its resource destroyed; the outer list's R-C4 conflicts come
/// from the inner one, on the immediate context and on a deferred one.
#[test]
fn r_c3_r_c4_nested_lists_through_the_interpreter() {
    let steps = vec![
        resource(32),
        resource(32),
        Step::Create(New::Query {
            kind: QueryChoice::Event,
        }),
        // List 0 (context 0): a Map(DISCARD) of resource 0, a query, a copy into resource 1.
        record(
            0,
            DcOp::MapWrite {
                resource: 0,
                data: Bytes { len: 12, seed: 3 },
            },
        ),
        record(0, DcOp::Unmap { resource: 0 }),
        record(0, DcOp::BeginQuery { query: 0 }),
        record(0, DcOp::Command(Cmd::Copy { dst: 1, src: 0 })),
        finish(0),
        // List 1 (context 1): binds, executes list 0 (nothing bound after), fills resource 0.
        record(
            1,
            DcOp::Bind {
                point: 0,
                object: Some(Obj::Resource(1)),
            },
        ),
        record(1, DcOp::ExecuteList { list: 0 }),
        record(1, DcOp::Command(Cmd::Fill { dst: 0, value: 9 })),
        finish(1),
        // List 0 dropped and its resource destroyed: list 1 keeps both.
        Step::DropList {
            list: 0,
            elsewhere: true,
        },
        Step::Destroy {
            object: Obj::Resource(1),
            elsewhere: false,
        },
        Step::Timeline(Timeline::Flush),
        execute(0),
        // R-C4 from the nested list: a Map of resource 0 on the IC, then the query begun.
        Step::Immediate(IcOp::Map {
            resource: 0,
            data: Bytes { len: 4, seed: 1 },
        }),
        execute(0),
        Step::Immediate(IcOp::Unmap { resource: 0 }),
        Step::Immediate(IcOp::BeginQuery { query: 0 }),
        execute(0),
        Step::Immediate(IcOp::EndQuery { query: 0 }),
        execute(0),
        // And on a deferred context that has the resource mapped.
        record(
            2,
            DcOp::MapWrite {
                resource: 0,
                data: Bytes { len: 4, seed: 2 },
            },
        ),
        record(2, DcOp::ExecuteList { list: 0 }),
        Step::Timeline(Timeline::CompleteAll),
    ];
    for mode in ListMode::ALL {
        let cov = command_lists::run_in(DEFAULT_BUDGET, mode, &steps);
        assert_eq!((cov.nested, cov.executed), (1, 2), "{cov:#?}");
        assert_eq!((cov.map_conflicts, cov.query_conflicts), (1, 1), "{cov:#?}");
        assert_eq!(cov.refused, 1, "the deferred context's conflict: {cov:#?}");
    }
}

/// Lists executed sixteen times by the next level reach the run's replay limit at the
/// third level: the model predicts the out of memory (R-E3) where the engine answers it.
#[test]
fn r_e3_nested_lists_past_the_replay_limit_run_out_of_memory() {
    let burst = |list: u8| Step::Record {
        dc: list % 3,
        elsewhere: false,
        ops: Burst {
            first: DcOp::ExecuteList { list },
            more: [Some(DcOp::ExecuteList { list }); 3],
        },
    };
    let mut steps = vec![
        resource(8),
        record(
            2,
            DcOp::Update {
                resource: 0,
                offset: 0,
                data: Bytes { len: 4, seed: 1 },
            },
        ),
        finish(2),
    ];
    for level in 0..3u8 {
        steps.extend([burst(level), burst(level), burst(level), burst(level)]);
        steps.push(finish(level % 3));
    }
    steps.push(execute(2));
    for mode in ListMode::ALL {
        let cov = command_lists::run_in(DEFAULT_BUDGET, mode, &steps);
        assert_eq!(cov.removals, 1, "{cov:#?}");
        assert_eq!(cov.finish_after_removal, 1, "{cov:#?}");
        assert_eq!(
            cov.executed, 1,
            "the second level replays 528 operations: {cov:#?}"
        );
    }
}

#[test]
fn r_d1_objects_destroyed_after_recording_stay_usable_by_the_list() {
    let mut steps = vec![
        resource(16),
        resource(24),
        Step::Create(New::View {
            resource: 1,
            kind: ViewKind::RenderTarget,
            first: 4,
            len: 8,
        }),
        Step::Create(New::Query {
            kind: QueryChoice::Event,
        }),
        record(
            0,
            DcOp::Update {
                resource: 0,
                offset: 0,
                data: Bytes { len: 16, seed: 3 },
            },
        ),
        record(0, DcOp::Command(Cmd::Copy { dst: 1, src: 0 })),
        record(
            0,
            DcOp::Command(Cmd::ClearView {
                view: 0,
                value: 0xee,
            }),
        ),
        record(
            0,
            DcOp::Bind {
                point: 1,
                object: Some(Obj::View(0)),
            },
        ),
        record(0, DcOp::BeginQuery { query: 0 }),
        record(
            0,
            DcOp::MapWrite {
                resource: 0,
                data: Bytes { len: 5, seed: 77 },
            },
        ),
        // The query's End and the Unmap are left to Finish (R-C4).
        finish(0),
        // List 1 overwrites both resources, so that each replay of list 0 shows.
        record(
            1,
            DcOp::Command(Cmd::Fill {
                dst: 1,
                value: 0x11,
            }),
        ),
        record(
            1,
            DcOp::Command(Cmd::Fill {
                dst: 0,
                value: 0x22,
            }),
        ),
        finish(1),
    ];
    for (object, elsewhere) in [
        (Obj::Resource(0), true),
        (Obj::View(0), false),
        (Obj::Resource(1), true),
        (Obj::Query(0), false),
    ] {
        steps.push(Step::Destroy { object, elsewhere });
    }
    steps.extend([
        Step::Timeline(Timeline::Flush),
        Step::Timeline(Timeline::CompleteAll),
        Step::Timeline(Timeline::Flush),
    ]);
    for _ in 0..2 {
        steps.extend([
            execute(1),
            Step::Execute { list: 0, times: 1 },
            Step::Timeline(Timeline::Flush),
            Step::Timeline(Timeline::CompleteAll),
        ]);
    }
    // Destroyed objects are refused by new recordings and by the IC.
    steps.extend([
        record(1, DcOp::Command(Cmd::Fill { dst: 0, value: 1 })),
        Step::Immediate(IcOp::Command(Cmd::ClearView { view: 0, value: 1 })),
        Step::Destroy {
            object: Obj::Resource(0),
            elsewhere: false,
        },
        Step::DropList {
            list: 0,
            elsewhere: true,
        },
        Step::Timeline(Timeline::Flush),
        Step::Timeline(Timeline::CompleteAll),
        Step::Timeline(Timeline::Flush),
    ]);
    let cov = command_lists::run_with_budget(DEFAULT_BUDGET, &steps);
    assert_eq!(cov.executed_with_destroyed, 6, "{cov:#?}");
    assert_eq!(cov.refused, 1, "{cov:#?}");
    assert_eq!(cov.immediate_refused, 1, "{cov:#?}");
}

#[test]
fn r_e3_out_of_memory_removes_the_context_then_it_records_again() {
    let steps = vec![
        resource(64),
        resource(8),
        record(
            0,
            DcOp::Update {
                resource: 1,
                offset: 0,
                data: Bytes { len: 8, seed: 5 },
            },
        ),
        record(1, DcOp::Command(Cmd::Fill { dst: 1, value: 4 })),
        record(0, DcOp::HugeUpdate { resource: 1 }),
        // Removed: calls are accepted and do nothing; a map hands out scratch bytes.
        record(0, DcOp::Command(Cmd::Fill { dst: 0, value: 9 })),
        record(
            0,
            DcOp::MapWrite {
                resource: 0,
                data: Bytes { len: 64, seed: 3 },
            },
        ),
        record(0, DcOp::Unmap { resource: 0 }),
        finish(0),
        // The other context was not affected.
        finish(1),
        execute(0),
        // Records again.
        record(0, DcOp::Command(Cmd::Copy { dst: 0, src: 1 })),
        finish(0),
        execute(1),
        // A map larger than the budget left is out of memory too.
        record(
            2,
            DcOp::Update {
                resource: 0,
                offset: 0,
                data: Bytes { len: 48, seed: 1 },
            },
        ),
        record(
            2,
            DcOp::MapWrite {
                resource: 0,
                data: Bytes { len: 9, seed: 2 },
            },
        ),
        finish(2),
        finish(2),
        Step::Execute { list: 0, times: 1 },
    ];
    let cov = command_lists::run_with_budget(160, &steps);
    assert_eq!(cov.removals, 2, "{cov:#?}");
    assert_eq!(cov.finish_after_removal, 2, "{cov:#?}");
    assert_eq!(cov.while_removed, 3, "{cov:#?}");
    assert_eq!(cov.finished, 3, "{cov:#?}");
    assert_eq!(cov.executed, 4, "{cov:#?}");
}

#[test]
fn r_e3_a_begin_reserves_the_end_finish_adds() {
    // Direct: the implicit End of a still-begun query (R-C4) is reserved by its Begin, as a
    // Map reserves its Unmap: a call that would leave no room for it runs out of memory
    // itself, and Finish never does.
    let config = SoftConfig {
        trace: false,
        ..SoftConfig::from_env().unwrap()
    };
    let budget = 1024;
    let device_config = DeviceConfig::default().with_deferred_budget(budget);
    let (device, mut ic, world) = soft::device(config, device_config).unwrap();
    let r = device
        .create_resource(ResourceDesc {
            byte_size: 1000,
            ..ResourceDesc::default()
        })
        .unwrap();
    let q = device.create_query(QueryKind::Occlusion).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    dc.begin_query(q).unwrap();
    let op = dc.stats().recorded_bytes;
    // The update and the owed End fill the budget exactly; one byte more does not fit.
    let len = budget - 3 * op;
    assert_eq!(
        dc.update(r, 0, &vec![1; len + 1]),
        Err(Error::OutOfMemory),
        "no room left for the End the Begin owes"
    );
    assert!(dc.is_removed());
    assert!(matches!(dc.finish(), Err(Error::OutOfMemory)));
    dc.begin_query(q).unwrap();
    dc.update(r, 0, &vec![1; len]).unwrap();
    assert_eq!(dc.stats().recorded_bytes, budget - op);
    let list = dc.finish().expect("the End was reserved");
    assert_eq!(list.stats().operations, 3);
    dc.command(SoftCommand::Fill { dst: r, value: 6 }).unwrap();
    let filled = dc.finish().unwrap();
    ic.execute_command_list(&list).unwrap();
    ic.execute_command_list(&filled).unwrap();
    let alloc = device.object(r).unwrap().allocation().unwrap();
    assert_eq!(world.read(alloc).unwrap(), vec![6; 1000]);
    drop((list, filled, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// Every committed seed of the target (`fuzz/seeds/command_lists/`) and every input a
/// campaign once crashed on (`fuzz/regressions/command_lists/`, named after the bug it
/// found) runs clean through the interpreter.
#[test]
fn r_c3_r_d1_committed_seeds_and_regressions_run_clean() {
    let inputs = crate::common::run_committed_fuzz_inputs("command_lists", |bytes| {
        command_lists::run_bytes(bytes);
    });
    assert!(inputs > 300, "{inputs} inputs");
}

/// A ring on a deferred context against the model (R-M2): a discard, appends at growing
/// offsets that find what was written before (the model checks the bytes handed out), a
/// command reading the ring between them, an append refused before any discard and one while
/// the discard is still mapped; the list executed twice lands the discard with every append.
#[test]
fn r_m2_a_ring_of_appends_matches_the_model() {
    let append = |offset: u8, seed: u8| {
        record(
            0,
            DcOp::MapAppend {
                resource: 0,
                offset,
                data: Bytes { len: 8, seed },
            },
        )
    };
    let steps = vec![
        resource(64),
        resource(64),
        append(0, 1), // no discard yet: refused, unheard
        record(
            0,
            DcOp::MapWrite {
                resource: 0,
                data: Bytes { len: 8, seed: 2 },
            },
        ),
        append(8, 3), // still mapped: refused
        record(0, DcOp::Unmap { resource: 0 }),
        append(8, 4),
        record(0, DcOp::Unmap { resource: 0 }),
        record(
            0,
            DcOp::Command(command_lists::Cmd::Copy { dst: 1, src: 0 }),
        ),
        append(16, 5),
        record(0, DcOp::Unmap { resource: 0 }),
        append(24, 6),
        finish(0),
        execute(0),
        ic_write(0, 9),
        execute(0),
        Step::Timeline(Timeline::CompleteAll),
    ];
    let cov = command_lists::run_with_budget(DEFAULT_BUDGET, &steps);
    assert_eq!(cov.appends, 3, "{cov:#?}");
    assert_eq!(cov.refused, 2, "{cov:#?}");
    assert_eq!(cov.executed, 2, "{cov:#?}");
}
