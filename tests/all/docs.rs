//! The facts the embedding guide states that can drift from the code: checked against the
//! source, so a hook or error added without the guide following fails here.

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The `Driver` trait's hooks, `(required, provided)`: a `fn` whose signature ends with `;`
/// is required, one with a body provided.
fn driver_hooks() -> (Vec<String>, Vec<String>) {
    let source = read("src/driver.rs");
    let start = source.find("pub trait Driver").expect("the trait");
    let body = &source[start..];
    let (mut required, mut provided) = (Vec::new(), Vec::new());
    for (at, _) in body.match_indices("\n    fn ") {
        let rest = &body[at + "\n    fn ".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let mut depth = 0i32;
        for c in rest.chars() {
            match c {
                '(' | '<' => depth += 1,
                ')' | '>' => depth -= 1,
                ';' if depth <= 0 => {
                    required.push(name);
                    break;
                }
                '{' if depth <= 0 => {
                    provided.push(name);
                    break;
                }
                _ => {}
            }
        }
    }
    (required, provided)
}

/// EMBEDDING.md counts the required and provided hooks and names every provided one.
#[test]
fn the_guide_counts_and_names_the_drivers_hooks() {
    let guide = read("docs/EMBEDDING.md");
    let (required, provided) = driver_hooks();
    assert!(
        required.len() > 10 && provided.len() > 10,
        "{required:?} {provided:?}"
    );
    let claim = format!(
        "{} required hooks and {} provided ones",
        required.len(),
        provided.len()
    );
    let flat = guide.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&claim), "EMBEDDING.md must say \"{claim}\"");
    for hook in &provided {
        assert!(
            guide.contains(&format!("`{hook}`")),
            "EMBEDDING.md does not name the provided hook `{hook}`"
        );
    }
}

/// The minimal driver's list of hooks (the section "A minimal driver") names every required
/// hook, says how many others have default bodies, and names each of those.
#[test]
fn the_minimal_drivers_list_names_every_hook() {
    let guide = read("docs/EMBEDDING.md");
    let (required, provided) = driver_hooks();
    let start = guide
        .find(&format!("The {} required hooks:", required.len()))
        .expect("the minimal driver's list of required hooks, with their count");
    let end = start + guide[start..].find("`Kernel`'s").expect("the list's end");
    let list = &guide[start..end];
    let flat = list.split_whitespace().collect::<Vec<_>>().join(" ");
    let claim = format!("The {} others have default bodies", provided.len());
    assert!(flat.contains(&claim), "the list must say \"{claim}\"");
    for hook in required.iter().chain(&provided) {
        assert!(
            list.contains(&format!("`{hook}`")),
            "the minimal driver's list does not name the hook `{hook}`"
        );
    }
}

/// EMBEDDING.md's error table has a row for every `Error` variant.
#[test]
fn the_guides_error_table_has_every_error() {
    let guide = read("docs/EMBEDDING.md");
    let source = read("src/error.rs");
    let start = source.find("pub enum Error {").expect("the enum");
    let end = start + source[start..].find("\n}").expect("its end");
    let variants: Vec<&str> = source[start..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && !l.starts_with("pub enum") && !l.is_empty())
        .map(|l| l.trim_end_matches(',').split('(').next().unwrap_or(l))
        .collect();
    assert!(variants.len() >= 5, "{variants:?}");
    for variant in variants {
        let row = format!("| `{variant}");
        assert!(
            guide.contains(&row),
            "EMBEDDING.md's error table has no row for `{variant}`"
        );
    }
}

/// The `Kernel` trait's methods.
fn kernel_methods() -> Vec<String> {
    let source = read("src/kernel.rs");
    let start = source.find("pub trait Kernel").expect("the trait");
    source[start..]
        .match_indices("\n    fn ")
        .map(|(at, _)| identifier(&source[start + at + "\n    fn ".len()..]))
        .collect()
}

/// The identifier `text` starts with.
fn identifier(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The variants of `pub enum {name}` in src/driver.rs (`Op`, `DeferredCall`).
fn variants(name: &str) -> Vec<String> {
    let source = read("src/driver.rs");
    let start = source.find(&format!("pub enum {name}<")).expect("the enum");
    let end = start + source[start..].find("\n}").expect("its end");
    source[start..end]
        .lines()
        .filter(|l| l.starts_with("    ") && !l.starts_with("     "))
        .map(str::trim)
        .filter(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
        .map(identifier)
        .collect()
}

/// The `pub fn`s of each type's inherent `impl` blocks in src/, by type name.
fn public_methods() -> std::collections::HashMap<String, Vec<String>> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut methods: std::collections::HashMap<String, Vec<String>> = Default::default();
    for file in files {
        let source = std::fs::read_to_string(file).unwrap();
        let mut owner: Option<String> = None;
        for line in source.lines() {
            if let Some(rest) = line.strip_prefix("impl") {
                // `impl<D: Driver, K: Kernel> Device<D, K> {`: the type after the generics;
                // a trait impl (`... for T`) has no inherent methods.
                let rest = match rest.starts_with('<') {
                    true => {
                        let mut depth = 0;
                        let end = rest
                            .char_indices()
                            .find(|&(_, c)| {
                                depth += match c {
                                    '<' => 1,
                                    '>' => -1,
                                    _ => 0,
                                };
                                depth == 0
                            })
                            .map_or(rest.len(), |(i, _)| i + 1);
                        &rest[end..]
                    }
                    false => rest,
                };
                owner = (!rest.contains(" for ")).then(|| identifier(rest.trim_start()));
            } else if let (Some(owner), Some(rest)) = (&owner, line.strip_prefix("    pub fn ")) {
                methods
                    .entry(owner.clone())
                    .or_default()
                    .push(identifier(rest));
            }
        }
    }
    methods
}

/// The rows of the guide's table whose header starts with `header`, each split into its
/// cells (a row with a stray `|` has the wrong number of cells and fails here).
fn table(guide: &str, header: &str) -> Vec<Vec<String>> {
    let start = guide.find(header).expect("the table");
    let mut lines = guide[start..].lines();
    let columns = lines.next().unwrap().matches('|').count() - 1;
    lines
        .skip(1) // the |---| line
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<String> = l
                .trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect();
            assert_eq!(cells.len(), columns, "a row with a stray `|`: {l}");
            cells
        })
        .collect()
}

/// The `code` spans of a cell.
fn spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// The members of `D3D11DDI_DEVICEFUNCS` and `D3D11_1DDI_DEVICEFUNCS` that a deferred
/// context's table leaves NULL, as the D3D11 DDI lists them ("Excluding DDI Functions for
/// Deferred Contexts"); the same list for both tables.
const NULL_ON_A_DEFERRED_CONTEXT: [&str; 33] = [
    "pfnStagingResourceMap",
    "pfnStagingResourceUnmap",
    "pfnQueryGetData",
    "pfnFlush",
    "pfnResourceMap",
    "pfnResourceUnmap",
    "pfnResourceIsStagingBusy",
    "pfnCalcPrivateResourceSize",
    "pfnCalcPrivateOpenedResourceSize",
    "pfnOpenResource",
    "pfnCalcPrivateShaderResourceViewSize",
    "pfnCalcPrivateRenderTargetViewSize",
    "pfnCalcPrivateDepthStencilViewSize",
    "pfnCalcPrivateElementLayoutSize",
    "pfnCalcPrivateBlendStateSize",
    "pfnCalcPrivateDepthStencilStateSize",
    "pfnCalcPrivateRasterizerStateSize",
    "pfnCalcPrivateShaderSize",
    "pfnCalcPrivateGeometryShaderWithStreamOutput",
    "pfnCalcPrivateSamplerSize",
    "pfnCalcPrivateQuerySize",
    "pfnCheckFormatSupport",
    "pfnCheckMultisampleQualityLevels",
    "pfnCheckCounterInfo",
    "pfnCheckCounter",
    "pfnCheckDeferredContextHandleSizes",
    "pfnCalcDeferredContextHandleSize",
    "pfnCalcPrivateDeferredContextSize",
    "pfnCreateDeferredContext",
    "pfnCalcPrivateCommandListSize",
    "pfnCalcPrivateTessellationShaderSize",
    "pfnCalcPrivateUnorderedAccessViewSize",
    "pfnSetResourceMinLOD",
];

/// The function-table members that deferred contexts and command lists reach, each of which
/// must have a row in the DDI table (named in its first two cells).
const MEMBERS_WITH_A_ROW: [&str; 30] = [
    "pfnGetCaps",
    "pfnCheckDeferredContextHandleSizes",
    "pfnCalcDeferredContextHandleSize",
    "pfnCalcPrivateDeferredContextSize",
    "pfnCreateDeferredContext",
    "pfnSetPredication",
    "pfnSoSetTargets",
    "pfnResourceUpdateSubresourceUP",
    "pfnDefaultConstantBufferUpdateSubresourceUP",
    "pfnDynamicIABufferMapDiscard",
    "pfnDynamicConstantBufferMapDiscard",
    "pfnDynamicResourceMapDiscard",
    "pfnDynamicIABufferUnmap",
    "pfnDynamicConstantBufferUnmap",
    "pfnDynamicResourceUnmap",
    "pfnDynamicIABufferMapNoOverwrite",
    "pfnDynamicConstantBufferMapNoOverwrite",
    "pfnResourceMap",
    "pfnQueryBegin",
    "pfnQueryEnd",
    "pfnCommandListExecute",
    "pfnRecycleCommandList",
    "pfnRecycleCreateCommandList",
    "pfnCalcPrivateCommandListSize",
    "pfnCreateCommandList",
    "pfnRecycleCreateDeferredContext",
    "pfnAbandonCommandList",
    "pfnRecycleDestroyCommandList",
    "pfnDestroyCommandList",
    "pfnDestroyDevice",
];

/// The `Driver` hooks that no deferred context or command list reaches, so the DDI table
/// leaves them out; every other hook has its place in the table.
const HOOKS_OUTSIDE_THE_TABLE: [&str; 9] = [
    "calc_private_size",
    "create_object",
    "destroy_object",
    "create_immediate",
    "flush",
    "gamma_caps",
    "blt_caps",
    "blt",
    "rotate_identities",
];

/// The `Kernel` methods that are not callbacks of `D3D11DDI_CORELAYER_DEVICECALLBACKS`;
/// every other one has a row in the callback table.
const KERNEL_OUTSIDE_THE_CALLBACK_TABLE: [&str; 9] = [
    "allocate",
    "deallocate",
    "submit",
    "completed_fence",
    "wait_for_fence",
    "present",
    "set_display_mode",
    "set_priority",
    "query_residency",
];

/// EMBEDDING.md's DDI table names only hooks, `DeferredCall` and `Op` variants and context
/// methods that exist, and covers every hook, recorded call and operation a deferred context
/// or a command list reaches, and every member of the function tables they reach.
#[test]
fn the_guides_ddi_table_names_real_hooks_and_covers_them() {
    let guide = read("docs/EMBEDDING.md");
    let rows = table(&guide, "| the runtime's call | the shim's entry point |");
    assert!(rows.len() > 20, "{} rows", rows.len());
    let (required, provided) = driver_hooks();
    let hooks: Vec<String> = required.into_iter().chain(provided).collect();
    let (calls, ops) = (variants("DeferredCall"), variants("Op"));
    assert!(calls.len() >= 7 && ops.len() >= 8, "{calls:?} {ops:?}");
    let methods = public_methods();

    let (mut heard, mut calls_heard, mut ops_heard) = (Vec::new(), Vec::new(), Vec::new());
    for row in &rows {
        // The hook columns: every snake_case name (or call) is a hook.
        for span in row[3..6].iter().flat_map(|c| spans(c)) {
            let name = identifier(span);
            let called = span[name.len()..].starts_with('(');
            if !name.starts_with(|c: char| c.is_ascii_lowercase())
                || !(name.contains('_') || called)
            {
                continue;
            }
            assert!(
                hooks.contains(&name),
                "the DDI table names `{name}`, which is no `Driver` hook (row {:?})",
                row[0]
            );
            let inner = span[name.len()..].trim_start_matches('(');
            let inner = inner.split(')').next().unwrap_or("");
            let (kind, known, seen) = match name.as_str() {
                "record_deferred" => ("DeferredCall", &calls, &mut calls_heard),
                "execute" => ("Op", &ops, &mut ops_heard),
                _ => {
                    heard.push(name);
                    continue;
                }
            };
            for variant in inner.split('/') {
                assert!(
                    known.iter().any(|v| v == variant),
                    "the DDI table names `{name}({variant})`: no `{kind}::{variant}`"
                );
                seen.push(variant.to_string());
            }
            heard.push(name);
        }
        // Every `Type::method` in the row exists (a `Driver::` one is a hook).
        for span in row.iter().flat_map(|c| spans(c)) {
            let Some((ty, rest)) = span.split_once("::") else {
                continue;
            };
            let method = identifier(rest);
            if !ty.chars().all(char::is_alphanumeric) || method.is_empty() || rest.contains('*') {
                continue;
            }
            let exists = match ty {
                "Driver" => hooks.contains(&method),
                "Kernel" => kernel_methods().contains(&method),
                "DeviceConfig" | "DeferredCall" | "Op" | "ThreadingCaps" | "ContextId" => true,
                // Flags, by name.
                "MapFlags" => cmdlist::MapFlags::from_name(&method).is_some(),
                "MapCaps" => cmdlist::MapCaps::from_name(&method).is_some(),
                "LockFlags" => cmdlist::LockFlags::from_name(&method).is_some(),
                _ => methods.get(ty).is_some_and(|m| m.contains(&method)),
            };
            assert!(
                exists,
                "the DDI table names `{ty}::{method}`, which does not exist"
            );
        }
    }
    for hook in &hooks {
        assert!(
            heard.contains(hook) || HOOKS_OUTSIDE_THE_TABLE.contains(&hook.as_str()),
            "the DDI table does not say when the engine calls `{hook}`"
        );
    }
    for hook in HOOKS_OUTSIDE_THE_TABLE {
        assert!(hooks.iter().any(|h| h == hook), "`{hook}` is no hook");
    }
    for call in &calls {
        assert!(
            calls_heard.contains(call),
            "no row of the DDI table makes `record_deferred({call})`"
        );
    }
    for op in ops.iter().filter(|op| *op != "Present") {
        assert!(
            ops_heard.contains(op),
            "no row of the DDI table makes `execute({op})`"
        );
    }

    // The function-table members: each has its row, and one the DDI leaves NULL on a
    // deferred context is named as the IC's there (or as NULL on the DC).
    for member in MEMBERS_WITH_A_ROW {
        let code = format!("`{member}");
        assert!(
            rows.iter()
                .any(|r| r[..2].iter().any(|c| c.contains(&code))),
            "the DDI table has no row for `{member}`"
        );
    }
    for row in &rows {
        let cell = &row[1];
        for member in NULL_ON_A_DEFERRED_CONTEXT {
            if spans(cell).iter().any(|s| identifier(s) == member) {
                assert!(
                    cell.contains("the IC's") || cell.contains(&format!("`{member}` is NULL")),
                    "`{member}` is NULL in a deferred context's table, yet row {:?} calls it \
                     as the DC's",
                    row[0]
                );
            }
        }
    }
}

/// The list of members a deferred context's table leaves NULL is the D3D11 DDI's, no more
/// and no fewer.
#[test]
fn the_guide_lists_the_members_a_deferred_context_leaves_null() {
    let guide = read("docs/EMBEDDING.md");
    let start = guide
        .find("members that the D3D11 DDI excludes for deferred contexts")
        .expect("the list");
    // The list ends with the sentence: the first code span followed by a full stop.
    let end = start + guide[start..].find("`.").expect("the list's end");
    let listed: Vec<String> = spans(&guide[start..end])
        .into_iter()
        .map(identifier)
        .filter(|s| s.starts_with("pfn"))
        .collect();
    for member in NULL_ON_A_DEFERRED_CONTEXT {
        assert!(
            listed.iter().any(|l| l == member),
            "EMBEDDING.md's list of NULL members lacks `{member}`"
        );
    }
    for member in &listed {
        assert!(
            NULL_ON_A_DEFERRED_CONTEXT.contains(&member.as_str()),
            "EMBEDDING.md lists `{member}` as NULL on a deferred context; the DDI does not"
        );
    }
}

/// The callback table names real `Kernel` methods and has a row for each of them that is a
/// core-layer callback, and for the state-refresh callbacks.
#[test]
fn the_guides_callback_table_names_real_kernel_methods() {
    let guide = read("docs/EMBEDDING.md");
    let rows = table(&guide, "| callback | `Kernel` method |");
    let methods = kernel_methods();
    assert!(methods.len() >= 7, "{methods:?}");
    let mut named = Vec::new();
    for row in &rows {
        for span in spans(&row[1]) {
            if let Some(rest) = span.strip_prefix("Kernel::") {
                let method = identifier(rest);
                assert!(
                    methods.contains(&method),
                    "the callback table names `Kernel::{method}`, which does not exist"
                );
                named.push(method);
            }
        }
    }
    for method in &methods {
        assert!(
            named.contains(method) || KERNEL_OUTSIDE_THE_CALLBACK_TABLE.contains(&method.as_str()),
            "the callback table has no row for `Kernel::{method}`"
        );
    }
    for callback in [
        "pfnSetErrorCb",
        "pfnPerformAmortizedProcessingCb",
        "pfnStateVsSrvCb",
    ] {
        assert!(
            rows.iter().any(|r| r[0].contains(&format!("`{callback}`"))),
            "the callback table has no row for `{callback}`"
        );
    }
}
