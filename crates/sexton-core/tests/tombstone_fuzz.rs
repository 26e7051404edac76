//! Fuzz-style tests of the tombstone decoder, which reads files any container of the pod
//! can write: arbitrary bytes never panic, and never make it allocate much more than the
//! input (the reader caps input at `MAX_RECORD`). Allocation is measured with a
//! counting allocator installed for this test binary alone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use proptest::prelude::*;
use sexton_core::MAX_RECORD;
use sexton_core::tombstone::Tombstone;

struct Counting;

// Counted per thread, and only on a thread that is measuring: other tests of this binary
// (and libtest's own threads) allocate at the same time, and a process-wide count once
// charged one of their allocations to the decoding of an 11-byte input (a failure under
// load). Const-initialised thread-locals without destructors never allocate, so the
// allocator may use them.
thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if MEASURING.with(Cell::get) {
            let now = CURRENT.with(|c| {
                c.set(c.get() + layout.size() as isize);
                c.get()
            });
            PEAK.with(|p| p.set(p.get().max(now)));
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if MEASURING.with(Cell::get) {
            CURRENT.with(|c| c.set(c.get() - layout.size() as isize));
        }
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Decodes `bytes` and returns the peak of memory this thread allocated meanwhile.
fn decode_peak(bytes: &[u8]) -> usize {
    CURRENT.with(|c| c.set(0));
    PEAK.with(|p| p.set(0));
    MEASURING.with(|m| m.set(true));
    let decoded = Tombstone::decode(bytes);
    MEASURING.with(|m| m.set(false));
    drop(decoded);
    PEAK.with(Cell::get).max(0) as usize
}

/// Generous but linear: a decoder may copy the input a few times (UTF-8 check, JSON
/// values, strings), never more.
fn bound(len: usize) -> usize {
    16 * len + 64 * 1024
}

/// Pieces of real tombstones, so random input often gets deep into the parsers.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("{".to_string()),
        Just("}".to_string()),
        Just("\"Born\":".to_string()),
        Just("\"Died\":".to_string()),
        Just("\"ExitCode\":".to_string()),
        Just("Born: ".to_string()),
        Just("Died: ".to_string()),
        Just("ExitCode: ".to_string()),
        Just("\"2020-04-28T10:41:47.0498724Z\"".to_string()),
        Just("2020-04-28T10:41:47Z".to_string()),
        Just(",".to_string()),
        Just("\n".to_string()),
        Just("  ".to_string()),
        Just("[[[[[[[[".to_string()),
        Just("\"\\u0000\"".to_string()),
        "-?[0-9]{1,25}",
        "[ -~]{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_nor_allocate_unboundedly(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let peak = decode_peak(&bytes);
        prop_assert!(peak <= bound(bytes.len()), "{} bytes of input took {peak} bytes", bytes.len());
    }

    #[test]
    fn near_tombstones_never_panic(parts in prop::collection::vec(fragment(), 0..40)) {
        let text = parts.concat();
        let peak = decode_peak(text.as_bytes());
        prop_assert!(peak <= bound(text.len()));
    }

    #[test]
    fn what_is_written_is_read_back(
        born in prop::option::of(0i64..4_000_000_000),
        died in prop::option::of(0i64..4_000_000_000),
        code in prop::option::of(any::<i32>()),
        reason in prop::option::of("[a-z-]{1,30}"),
    ) {
        let at = |s: i64| chrono::DateTime::from_timestamp(s, 123_456_789).unwrap();
        let t = Tombstone {
            born: born.map(at),
            died: died.map(at),
            exit_code: code,
            reason,
            ..Tombstone::default()
        };
        prop_assert_eq!(Tombstone::decode(&t.encode()), Ok(t));
    }
}

#[test]
fn the_largest_readable_record_stays_linear() {
    // worst cases at the reader's cap: deep nesting, one huge string, many keys
    let cap = MAX_RECORD as usize;
    let cases: Vec<Vec<u8>> = vec![
        "[".repeat(cap).into_bytes(),
        format!("{{\"Reason\":\"{}\"}}", "x".repeat(cap - 16)).into_bytes(),
        format!("{{{}\"Born\":null}}", "\"k\":1,".repeat(cap / 6 - 3)).into_bytes(),
        "Born: x\n".repeat(cap / 8).into_bytes(),
        vec![0xff; cap],
    ];
    for bytes in cases {
        assert!(bytes.len() <= cap);
        let peak = decode_peak(&bytes);
        assert!(
            peak <= bound(bytes.len()),
            "{} bytes took {peak}",
            bytes.len()
        );
    }
}
