//! The captured spans as a trace in the Trace Event Format, which ui.perfetto.dev and
//! chrome://tracing open: one track per thread, a complete event (`"ph": "X"`) per span, and
//! for each execute of a list a flow (`"s"` then `"f"`) from the `finish` span that made the
//! list to the `execute` span, across threads.
//!
//! The records are of one fixed shape (names this program chose, numbers), so they are
//! written directly; the job's tests read the file back with a JSON parser.

use std::io::{self, Write};

use super::capture::{Captured, Kind, Span};

/// The process id every event carries (one process).
const PID: u32 = 1;

/// A lane's thread id in the trace: from 1 (some viewers fold thread 0 into another).
fn tid(lane: usize) -> usize {
    lane + 1
}

/// Writes `captured` as a JSON trace to `out`; returns the number of flows written.
pub fn write(captured: &Captured, mut out: impl Write) -> io::Result<usize> {
    let mut events = Events::new(&mut out)?;
    events.push(format_args!(
        r#"{{"ph":"M","pid":{PID},"name":"process_name","args":{{"name":"frame (cmdlist)"}}}}"#
    ))?;
    // Tracks in a fixed order: the immediate context's first, then by name.
    let mut order: Vec<usize> = (0..captured.lanes.len()).collect();
    order.sort_by_key(|&tid| {
        (
            captured.lanes[tid] != super::IMMEDIATE,
            &captured.lanes[tid],
        )
    });
    for (sort_index, &lane) in order.iter().enumerate() {
        let (name, tid) = (Escaped(&captured.lanes[lane]), tid(lane));
        events.push(format_args!(
            r#"{{"ph":"M","pid":{PID},"tid":{tid},"name":"thread_name","args":{{"name":"{name}"}}}}"#
        ))?;
        events.push(format_args!(
            r#"{{"ph":"M","pid":{PID},"tid":{tid},"name":"thread_sort_index","args":{{"sort_index":{sort_index}}}}}"#
        ))?;
    }
    for span in &captured.spans {
        let (ts, dur) = (Micros(span.start), Micros(span.end - span.start));
        let (name, tid) = (span.kind.name(), tid(span.lane));
        let cat = match span.kind {
            Kind::Engine(_) | Kind::Other(_) => "cmdlist",
            Kind::Frame(_) => "frame",
        };
        let mut args = Vec::new();
        if let Some(list) = span.list {
            args.push(format!(r#""list":{list}"#));
        }
        if let Some(context) = span.context {
            args.push(format!(r#""context":{context}"#));
        }
        if let Kind::Frame(index) = span.kind {
            args.push(format!(r#""index":{index}"#));
        }
        let args = args.join(",");
        events.push(format_args!(
            r#"{{"ph":"X","pid":{PID},"tid":{tid},"ts":{ts},"dur":{dur},"name":"{name}","cat":"{cat}","args":{{{args}}}}}"#
        ))?;
    }
    // Each execute of a list gets a flow of its own from the list's finish: a flow event
    // binds to the slice that encloses its timestamp on its thread, here a nanosecond into
    // the slice (inside it, before the finish's first step begins).
    let flows = captured.flows();
    for (id, (finish, execute)) in flows.iter().enumerate() {
        let id = id + 1;
        let inside = |s: &Span| s.start + (s.end - s.start).min(1);
        let (from, to) = (Micros(inside(finish)), Micros(inside(execute)));
        let (from_tid, to_tid) = (tid(finish.lane), tid(execute.lane));
        events.push(format_args!(
            r#"{{"ph":"s","pid":{PID},"tid":{from_tid},"ts":{from},"id":{id},"name":"list","cat":"list"}}"#
        ))?;
        events.push(format_args!(
            r#"{{"ph":"f","bp":"e","pid":{PID},"tid":{to_tid},"ts":{to},"id":{id},"name":"list","cat":"list"}}"#
        ))?;
    }
    events.end()?;
    Ok(flows.len())
}

/// The `traceEvents` array being written: commas between events, the object closed at the
/// end.
struct Events<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> Events<W> {
    fn new(mut out: W) -> io::Result<Self> {
        out.write_all(br#"{"displayTimeUnit":"ms","traceEvents":["#)?;
        Ok(Events { out, first: true })
    }

    fn push(&mut self, event: std::fmt::Arguments<'_>) -> io::Result<()> {
        let sep = if self.first { "\n" } else { ",\n" };
        self.first = false;
        self.out.write_all(sep.as_bytes())?;
        self.out.write_fmt(event)
    }

    fn end(mut self) -> io::Result<()> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()
    }
}

/// Nanoseconds written as microseconds with three decimals (the format's unit).
struct Micros(u64);

impl std::fmt::Display for Micros {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// A string as the inside of a JSON string literal.
struct Escaped<'a>(&'a str);

impl std::fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::fmt::Write as _;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_strings_parse_back() {
        let name = "worker \"0\"\\\n\u{1}é";
        let json = format!("\"{}\"", Escaped(name));
        let parsed: tinyjson::JsonValue = json.parse().expect("valid JSON");
        assert_eq!(parsed.get::<String>().map(String::as_str), Some(name));
    }

    #[test]
    fn micros_keep_nanoseconds() {
        assert_eq!(Micros(1_234_567).to_string(), "1234.567");
        assert_eq!(Micros(5).to_string(), "0.005");
    }
}
