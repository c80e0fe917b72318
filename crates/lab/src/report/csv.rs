//! Writing CSV (RFC 4180 quoting) for raw results.

/// A table of strings with a header row.
#[derive(Clone, Debug, Default)]
pub struct Csv {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Csv {
    /// A table with these columns.
    pub fn new(header: &[&str]) -> Csv {
        Csv { header: header.iter().map(|s| s.to_string()).collect(), rows: Vec::new() }
    }

    /// Adds a row (must have one cell per column).
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }

    /// The CSV text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let line: Vec<String> = row.iter().map(|c| quote(c)).collect();
            out.push_str(&line.join(","));
            out.push('\n');
        }
        out
    }
}

/// A float cell: empty for NaN (so the CSV stays numeric), else full precision.
pub fn num(v: f64) -> String {
    if v.is_finite() { format!("{v}") } else { String::new() }
}

fn quote(cell: &str) -> String {
    if cell.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_when_needed() {
        let mut c = Csv::new(&["a", "b"]);
        c.row(vec!["x,y".into(), "say \"hi\"".into()]);
        c.row(vec![num(1.5), num(f64::NAN)]);
        assert_eq!(c.render(), "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n1.5,\n");
    }
}
