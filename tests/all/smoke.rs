use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig};
use cmdlist::{Clock, DeviceConfig, ListMode, ResourceDesc};

#[test]
fn create_copy_destroy_flush_drain() {
    let (device, mut ic, world) =
        soft::device(SoftConfig::from_env().unwrap(), DeviceConfig::default()).unwrap();
    let desc = ResourceDesc {
        byte_size: 16,
        ..Default::default()
    };
    let a = device.create_resource(desc).unwrap();
    let b = device.create_resource(desc).unwrap();
    ic.update(a, 0, &[7; 16]).unwrap();
    ic.command(&SoftCommand::Copy { dst: b, src: a }).unwrap();
    device.destroy(a).unwrap();
    ic.flush().unwrap();
    assert_eq!(
        world
            .read(device.object(b).unwrap().allocation().unwrap())
            .unwrap(),
        vec![7; 16]
    );
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn record_finish_execute_replays_bytes() {
    use cmdlist::{BindClass, BindPoint, HandleType, Stage, ViewDesc};
    let (device, mut ic, world) =
        soft::device(SoftConfig::from_env().unwrap(), DeviceConfig::default()).unwrap();
    let desc = ResourceDesc {
        byte_size: 32,
        usage: cmdlist::Usage::Dynamic,
        ..Default::default()
    };
    let a = device.create_resource(desc).unwrap();
    let b = device.create_resource(desc).unwrap();
    let v = device
        .create_view(
            HandleType::ShaderResourceView,
            ViewDesc {
                resource: b,
                first_byte: 8,
                byte_len: 8,
            },
        )
        .unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    dc.update(a, 0, &[3; 32]).unwrap();
    dc.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
    dc.command(SoftCommand::ClearView { view: v, value: 9 })
        .unwrap();
    dc.bind(
        BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0),
        Some(v.any()),
    )
    .unwrap();
    dc.map_discard(a).unwrap()[0] = 42;
    dc.unmap(a).unwrap();
    let list = dc.finish().unwrap();
    device.destroy(v).unwrap();
    for _ in 0..2 {
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
    }
    let mut expect = vec![3u8; 32];
    expect[8..16].fill(9);
    assert_eq!(
        world
            .read(device.object(b).unwrap().allocation().unwrap())
            .unwrap(),
        expect
    );
    assert_eq!(
        world
            .read(device.object(a).unwrap().allocation().unwrap())
            .unwrap()[0],
        42
    );
    drop(list);
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_c4_map_discard_needs_a_dynamic_resource() {
    use cmdlist::{AppError, Error, Usage};
    let (device, mut ic, world) =
        soft::device(SoftConfig::from_env().unwrap(), DeviceConfig::default()).unwrap();
    let fixed = device
        .create_resource(ResourceDesc {
            byte_size: 8,
            ..Default::default()
        })
        .unwrap();
    let dynamic = device
        .create_resource(ResourceDesc {
            byte_size: 8,
            usage: Usage::Dynamic,
            ..Default::default()
        })
        .unwrap();
    // The one answer for a Map the resource does not allow, as for NO_OVERWRITE.
    let refused = Error::Application(AppError::NotMappable);
    assert_eq!(ic.map_discard(fixed), Err(refused));
    assert_eq!(ic.map_no_overwrite(fixed).map(drop), Err(refused));
    assert_eq!(ic.map_discard(dynamic).map(|b| b.len()), Ok(8));
    ic.unmap(dynamic).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    assert_eq!(dc.map_discard(fixed).map(|b| b.len()), Err(refused));
    assert_eq!(dc.map_discard(dynamic).map(|b| b.len()), Ok(8));
    dc.unmap(dynamic).unwrap();
    drop(dc.finish().unwrap());
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// The soft driver and kernel keep sizes and offsets as `u64` and index CPU memory with
/// `usize`: an offset past the address space is out of range and a resource bigger than it
/// is out of memory, on every target (a 32-bit offset of 4 GiB never wraps to byte 0).
#[test]
fn soft_offsets_and_sizes_past_the_address_space_are_refused() {
    use cmdlist::{AppError, Error};
    let (device, mut ic, world) =
        soft::device(SoftConfig::from_env().unwrap(), DeviceConfig::default()).unwrap();
    let beyond = (usize::MAX as u64).saturating_add(1);
    for size in [beyond, beyond.saturating_add(16), u64::MAX] {
        let desc = ResourceDesc {
            byte_size: size,
            ..Default::default()
        };
        assert_eq!(
            device.create_resource(desc),
            Err(Error::OutOfMemory),
            "{size:#x}"
        );
    }
    let desc = ResourceDesc {
        byte_size: 16,
        ..Default::default()
    };
    let (a, b) = (
        device.create_resource(desc).unwrap(),
        device.create_resource(desc).unwrap(),
    );
    ic.update(a, 0, &[7; 16]).unwrap();
    let out_of_range = Err(Error::Application(AppError::OutOfRange));
    for offset in [1 << 32, beyond, u64::MAX - 3] {
        assert_eq!(ic.update(b, offset, &[1; 4]), out_of_range, "{offset:#x}");
        let copies = [
            SoftCommand::CopyRegion {
                dst: b,
                dst_offset: offset,
                src: a,
                src_offset: 0,
                len: 4,
            },
            SoftCommand::CopyRegion {
                dst: b,
                dst_offset: 0,
                src: a,
                src_offset: offset,
                len: 4,
            },
        ];
        for copy in copies {
            assert_eq!(ic.command(&copy), out_of_range, "{copy:?}");
        }
    }
    ic.flush().unwrap();
    let read = |r: cmdlist::Handle<cmdlist::handle::Resource>| {
        world
            .read(device.object(r).unwrap().allocation().unwrap())
            .unwrap()
    };
    assert_eq!(read(b), vec![0; 16], "nothing reached the first bytes");
    assert_eq!(read(a), vec![7; 16]);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// The suite runs once per kind of driver, chosen by `.ci/run`'s environment
/// (`CMDLIST_SOFT_EMULATED=1`, `CMDLIST_SOFT_DRIVER_BUILT=1`, neither): a variable set but
/// not read would run the same kind three times. The variables are read here directly, and
/// the devices the tests make (the shared helpers, and `SoftConfig::from_env`) must be of
/// the list mode they name (R-C3 for the emulated one).
#[test]
fn the_suite_tests_the_driver_kind_the_environment_names() {
    let on = |name| std::env::var(name).as_deref() == Ok("1");
    let expected = if on("CMDLIST_SOFT_EMULATED") {
        ListMode::Emulated
    } else if on("CMDLIST_SOFT_DRIVER_BUILT") {
        ListMode::DriverBuilt
    } else {
        ListMode::Replayed
    };
    let (device, _ic, _world) = crate::common::setup(Gpu::Manual, true, Clock::Completed);
    assert_eq!(device.list_mode(), expected);
    let (device, _ic, _world) =
        soft::device(SoftConfig::from_env().unwrap(), DeviceConfig::default()).unwrap();
    assert_eq!(device.list_mode(), expected);
    assert_eq!(
        device.emulates_command_lists(),
        expected == ListMode::Emulated
    );
}

/// What a driver logs of a recorded call: its handles and how many bytes, not the bytes.
#[test]
fn a_recorded_call_debug_prints_handles_and_lengths() {
    use cmdlist::soft::null::{copy_of, null_device, NullDriver};
    use cmdlist::DeferredCall;
    let (device, _ic) = null_device(DeviceConfig::default()).unwrap();
    let copy = copy_of(&device);
    let update: DeferredCall<'_, NullDriver> = DeferredCall::Update {
        resource: copy.dst,
        offset: 8,
        data: &[0xAB; 300],
    };
    let shown = format!("{update:?}");
    assert!(shown.starts_with("Update { resource: "), "{shown}");
    assert!(shown.contains("offset: 8, data_len: 300"), "{shown}");
    assert!(!shown.contains("171, 171"), "{shown}"); // 0xAB: no byte printed
    let command: DeferredCall<'_, NullDriver> = DeferredCall::Command(&copy);
    assert!(
        format!("{command:?}").starts_with("Command(CopyCommand {"),
        "{command:?}"
    );
}
