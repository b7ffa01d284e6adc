//! A record as one line of text: its call's arguments, objects named by what they are and
//! their captured handle's slot (`resource#7`; `resource#7.2` for the slot's second life),
//! and its outcome.
//!
//! A handle's high half is its slot's generation, counted from a base of the device's own:
//! the first life of a slot is the lowest generation the capture's creates made, and a
//! handle whose generation is below it (none of the capture's) shows it raw
//! (`resource#7.g12`).

use std::collections::HashMap;
use std::fmt::Write as _;

use cmdlist::capture::{Call, Outcome, Record};
use cmdlist::dxgi::Rect;
use cmdlist::handle::{AnyHandle, Handle, ObjectKind};
use cmdlist::soft::SoftCommand;
use cmdlist::{BindClass, BindPoint, HandleType, ObjectDesc, ResourceDesc};

/// Bits of a handle's low half that name its slot (the top 8 name the device).
const SLOT_MASK: u64 = (1 << 24) - 1;

/// What a create makes, by the capture's handle bits and a short name of its type.
pub fn made(call: &Call<'_, SoftCommand>) -> Option<(u64, &'static str)> {
    match call {
        Call::Create { desc, made } if *made != 0 => Some((*made, type_name(desc.handle_type()))),
        Call::CreatePrimary { made, .. } if *made != 0 => Some((*made, "primary")),
        _ => None,
    }
}

/// A handle type's short name.
fn type_name(ty: HandleType) -> &'static str {
    match ty {
        HandleType::Resource => "resource",
        HandleType::ShaderResourceView => "srv",
        HandleType::RenderTargetView => "rtv",
        HandleType::DepthStencilView => "dsv",
        HandleType::UnorderedAccessView => "uav",
        HandleType::Shader => "shader",
        HandleType::ElementLayout => "layout",
        HandleType::BlendState => "blend",
        HandleType::DepthStencilState => "depth_stencil",
        HandleType::RasterizerState => "rasterizer",
        HandleType::SamplerState => "sampler",
        HandleType::Query => "query",
        HandleType::CommandList => "list",
        _ => "object",
    }
}

/// Names objects by their captured handles.
pub struct Names {
    objects: HashMap<u64, &'static str>,
    /// The lowest generation the capture's creates made.
    base: u64,
}

impl Names {
    /// Names from the creates of a capture (`Frames::objects`).
    pub fn new(objects: HashMap<u64, &'static str>) -> Names {
        let base = objects.keys().map(|bits| bits >> 32).min().unwrap_or(1);
        Names { objects, base }
    }

    /// `what#slot`, `what#slot.generation` past the slot's first life; `what` is the type
    /// the capture made the object as, else `fallback`.
    fn name(&self, bits: u64, fallback: &'static str) -> String {
        let what = self.objects.get(&bits).copied().unwrap_or(fallback);
        let (slot, generation) = (bits & SLOT_MASK, bits >> 32);
        match generation.checked_sub(self.base) {
            Some(0) => format!("{what}#{slot}"),
            Some(life) => format!("{what}#{slot}.{}", life + 1),
            None => format!("{what}#{slot}.g{generation}"),
        }
    }

    fn any(&self, h: AnyHandle) -> String {
        self.name(h.to_bits(), "object")
    }

    fn of<T: ObjectKind>(&self, h: Handle<T>, fallback: &'static str) -> String {
        self.name(h.to_bits(), fallback)
    }

    fn resource<T: ObjectKind>(&self, h: Handle<T>) -> String {
        self.of(h, "resource")
    }

    /// The call's arguments.
    pub fn call(&self, call: &Call<'_, SoftCommand>) -> String {
        let r = |h| self.resource(h);
        match *call {
            Call::Create { desc, made } => {
                let made = match made {
                    0 => "nothing".to_string(),
                    bits => self.name(bits, type_name(desc.handle_type())),
                };
                format!("{made} = {}", self.desc(&desc))
            }
            Call::Destroy(h) => self.any(h),
            Call::CreateDeferred(stream) => format!("dc {stream}"),
            Call::DropList(list) | Call::Execute { list, .. } => {
                let restoring = match call {
                    Call::Execute {
                        restoring: true, ..
                    } => " restoring",
                    _ => "",
                };
                format!("list dc {}/{}{restoring}", list.stream, list.finish)
            }
            Call::CreatePrimary { desc, made } => {
                format!("{} = {}", self.name(made, "primary"), resource_desc(&desc))
            }
            Call::DestroyPrimary(h) | Call::Unmap(h) => r(h),
            Call::Command(c) => self.command(&c),
            Call::Update {
                resource,
                offset,
                data,
            } => format!("{} at {offset}: {} bytes", r(resource), data.len()),
            Call::Bind { point, object } => {
                let what = object.map_or("nothing".into(), |h| self.any(h));
                format!("{} = {what}", point_name(point))
            }
            Call::Map {
                resource,
                ty,
                flags,
            } => format!("{} {ty:?} flags {:#x}", r(resource), flags.bits()),
            Call::Written { resource, bytes } => format!("{}: {} bytes", r(resource), bytes.len()),
            Call::BeginQuery(q) | Call::EndQuery(q) | Call::QuerySignaled(q) => self.of(q, "query"),
            Call::Finish { restoring } => match restoring {
                true => "restoring state".into(),
                false => String::new(),
            },
            Call::Present(args) => {
                let mut s = format!(
                    "{} sub {} flags {:#x} interval {}",
                    r(args.src),
                    args.src_subresource,
                    args.flags.bits(),
                    args.flip_interval
                );
                if let Some((dst, sub)) = args.dst {
                    let _ = write!(s, " to {} sub {sub}", r(dst));
                }
                s
            }
            Call::Blt(args) => {
                let src_rect = args.src_rect.map_or("whole".into(), rect);
                format!(
                    "{} {} <- {} {} flags {:#x} {:?}",
                    r(args.dst),
                    rect(args.dst_rect),
                    r(args.src),
                    src_rect,
                    args.flags.bits(),
                    args.rotation
                )
            }
            Call::Rotate { count, resources } => {
                let names: Vec<_> = resources
                    .iter()
                    .take(usize::from(count))
                    .flatten()
                    .map(|&h| r(h))
                    .collect();
                names.join(" ")
            }
            Call::MapUnmap {
                resource,
                ty,
                flags,
                written,
                unmap_seq,
                unmap_outcome,
            } => format!(
                "{} {ty:?} flags {:#x}, {} bytes written, Unmap at seq {unmap_seq}: {}",
                r(resource),
                flags.bits(),
                written.len(),
                outcome(unmap_outcome)
            ),
            Call::SetDisplayMode {
                primary,
                subresource,
            } => format!("{} sub {subresource}", r(primary)),
            Call::SetPriority { resource, priority } => {
                format!("{} priority {priority}", r(resource))
            }
            Call::QueryResidency(n) => format!("{n} resources"),
            Call::ResourceIsBusy(h) => r(h),
            Call::Checksum { resource, crc } => format!("{} crc {crc:#010x}", r(resource)),
            Call::Answer(value) => format!("{value:#x}"),
            _ => String::new(),
        }
    }

    fn desc(&self, desc: &ObjectDesc<'_>) -> String {
        match *desc {
            ObjectDesc::Resource(r) => resource_desc(&r),
            ObjectDesc::View { desc, .. } => format!(
                "view of {} bytes {}+{}",
                self.resource(desc.resource),
                desc.first_byte,
                desc.byte_len
            ),
            ObjectDesc::Shader(code) => format!("shader of {} bytes", code.len()),
            ObjectDesc::ElementLayout(layout) => format!("layout of {} bytes", layout.len()),
            ObjectDesc::State { ty, desc } => format!("{ty:?} of {} bytes", desc.len()),
            ObjectDesc::Query(kind) => format!("{kind:?} query"),
        }
    }

    fn command(&self, c: &SoftCommand) -> String {
        let r = |h| self.resource(h);
        match *c {
            SoftCommand::Copy { dst, src } => format!("Copy {} <- {}", r(dst), r(src)),
            SoftCommand::CopyRegion {
                dst,
                dst_offset,
                src,
                src_offset,
                len,
            } => format!(
                "CopyRegion {}+{dst_offset} <- {}+{src_offset}, {len} bytes",
                r(dst),
                r(src)
            ),
            SoftCommand::Fill { dst, value } => format!("Fill {} with {value:#04x}", r(dst)),
            SoftCommand::ClearView { view, value } => {
                format!("ClearView {} to {value:#04x}", self.of(view, "view"))
            }
            SoftCommand::FillBound { point, value } => {
                format!("FillBound {} with {value:#04x}", point_name(point))
            }
            SoftCommand::FillIcByte { dst } => format!("FillIcByte {}", r(dst)),
            SoftCommand::Draw {
                constants,
                vertices,
                point,
            } => format!(
                "Draw constants {} vertices {} into {}",
                r(constants),
                r(vertices),
                point_name(point)
            ),
        }
    }
}

/// A record's line after its place: kind, arguments, outcome.
pub fn record(names: &Names, record: &Record<'_, SoftCommand>) -> String {
    let args = names.call(&record.call);
    let kind = format!("{:?}", record.call.kind());
    match args.is_empty() {
        true => format!("{kind} -> {}", outcome(record.outcome)),
        false => format!("{kind} {args} -> {}", outcome(record.outcome)),
    }
}

/// The byte strings a call carries that its line shows only the length of: an Update's
/// data, a Map's bytes, a shader's code, a state's or layout's description.
pub fn byte_strings<'a>(call: &Call<'a, SoftCommand>) -> Vec<&'a [u8]> {
    match *call {
        Call::Update { data, .. } => vec![data],
        Call::Written { bytes, .. } => vec![bytes],
        Call::MapUnmap { written, .. } => vec![written],
        Call::Create { desc, .. } => match desc {
            ObjectDesc::Shader(b) | ObjectDesc::ElementLayout(b) => vec![b],
            ObjectDesc::State { desc, .. } => vec![desc],
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// `ok`, or the error's name.
pub fn outcome(outcome: Outcome) -> String {
    match outcome {
        Outcome::Ok => "ok".into(),
        Outcome::Err(cmdlist::Error::Application(kind)) => format!("{kind:?}"),
        Outcome::Err(e) => format!("{e:?}"),
    }
}

fn resource_desc(d: &ResourceDesc) -> String {
    let mut s = format!("{:?} {} bytes", d.usage, d.byte_size);
    if let Some(t) = d.texture {
        let _ = write!(s, " texture {}x{} format {}", t.width, t.height, t.format);
    }
    if !d.bind.is_empty() {
        let _ = write!(s, " bind {:#x}", d.bind.bits());
    }
    s
}

fn rect(r: Rect) -> String {
    format!("({},{})-({},{})", r.left, r.top, r.right, r.bottom)
}

fn point_name(p: BindPoint) -> String {
    let class = match p.class {
        BindClass::Shader(s) => format!("{s:?}Shader"),
        BindClass::ConstantBuffer(s) => format!("{s:?}ConstantBuffer"),
        BindClass::ShaderResource(s) => format!("{s:?}ShaderResource"),
        BindClass::Sampler(s) => format!("{s:?}Sampler"),
        c => format!("{c:?}"),
    };
    format!("{class}[{}]", p.slot)
}

/// `bytes` as hex, 32 a line, each line indented and led by its offset.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::new();
    for (i, chunk) in bytes.chunks(32).enumerate() {
        let _ = write!(s, "    {:6x} ", i * 32);
        for b in chunk {
            let _ = write!(s, " {b:02x}");
        }
        s.push('\n');
    }
    s
}
