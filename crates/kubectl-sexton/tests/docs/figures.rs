//! The measured figures the documentation quotes, read from BENCHMARKS.md: the one place
//! they are recorded, each section written (and stamped) by its benchmark harness. The
//! pages quote them in generated fragments (docs.rs), so a new measurement changes the
//! docs through `SEXTON_BLESS=1`, never by copying numbers by hand.

/// A Markdown table: its header cells and its rows' cells.
pub struct Table {
    what: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn cells(line: &str) -> Vec<String> {
    let line = line.trim();
    let inner = line.strip_prefix('|').unwrap_or(line);
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

/// The first table after the first line of `doc` that contains `after` (a heading or the
/// bold line that names the table).
pub fn table(doc: &str, after: &str) -> Table {
    let mut lines = doc
        .lines()
        .skip_while(|l| !l.contains(after))
        .skip(1)
        .skip_while(|l| !l.starts_with('|'));
    let header = cells(
        lines
            .next()
            .unwrap_or_else(|| panic!("BENCHMARKS.md: no table after {after:?}")),
    );
    let rows = lines
        .skip(1) // the alignment row
        .take_while(|l| l.starts_with('|'))
        .map(cells)
        .collect();
    Table {
        what: after.to_string(),
        header,
        rows,
    }
}

impl Table {
    /// Whether a header cell starts with `col`.
    pub fn has_column(&self, col: &str) -> bool {
        self.header.iter().any(|h| h.starts_with(col))
    }

    /// The text of column `col` (the first header cell that starts with it) in the row
    /// whose first cells start with `keys`.
    pub fn cell(&self, keys: &[&str], col: &str) -> &str {
        let c = self
            .header
            .iter()
            .position(|h| h.starts_with(col))
            .unwrap_or_else(|| panic!("BENCHMARKS.md {:?}: no column {col:?}", self.what));
        let row = self
            .rows
            .iter()
            .find(|r| {
                keys.iter()
                    .zip(r.iter())
                    .all(|(k, cell)| cell.starts_with(k))
            })
            .unwrap_or_else(|| panic!("BENCHMARKS.md {:?}: no row {keys:?}", self.what));
        &row[c]
    }

    /// The first number of that cell (`1,782`, `≤ 4.0`, `14.9; 93.5` → 14.9).
    pub fn num(&self, keys: &[&str], col: &str) -> f64 {
        number(self.cell(keys, col)).unwrap_or_else(|| {
            panic!(
                "BENCHMARKS.md {:?}: {keys:?} {col:?} holds no number",
                self.what
            )
        })
    }

    /// The last number of that cell (`14.9; 93.5` → 93.5).
    pub fn last_num(&self, keys: &[&str], col: &str) -> f64 {
        let cell = self.cell(keys, col);
        let tail = cell.rsplit([';', '/']).next().unwrap_or(cell);
        number(tail).unwrap_or_else(|| {
            panic!(
                "BENCHMARKS.md {:?}: {keys:?} {col:?} holds no number",
                self.what
            )
        })
    }
}

/// The first number in `text`, thousands separators removed.
pub fn number(text: &str) -> Option<f64> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let digits: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .filter(|c| *c != ',')
        .collect();
    digits.trim_end_matches('.').parse().ok()
}

/// Microseconds as milliseconds: two decimals under 1 ms, one above (`0.31 ms`, `2.2 ms`).
pub fn ms_of_us(us: f64) -> String {
    if us < 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.1} ms", us / 1000.0)
    }
}

/// kB as MB, one decimal.
pub fn mb_of_kb(kb: f64) -> String {
    format!("{:.1}", kb / 1000.0)
}

/// Bytes as MB, one decimal.
pub fn mb_of_bytes(bytes: f64) -> String {
    format!("{:.1}", bytes / 1e6)
}

/// The stamp's commit and date of the section that starts at the line containing
/// `section` (bench/lib/stamp.py's line: "Measured at `COMMIT` on DATE TIME UTC: ...").
pub fn stamp(doc: &str, section: &str) -> (String, String) {
    let line = doc
        .lines()
        .skip_while(|l| !l.contains(section))
        .find(|l| l.starts_with("Measured at `"))
        .unwrap_or_else(|| {
            panic!("BENCHMARKS.md: no stamp after {section:?} (bench/lib/stamp.py)")
        });
    let commit = line.split('`').nth(1).unwrap_or_default().to_string();
    let date = line
        .split(" on ")
        .nth(1)
        .and_then(|d| d.split(' ').next())
        .unwrap_or_default()
        .to_string();
    (commit, date)
}
