//! Markdown tables for summaries.

/// A pipe table; the first column is left-aligned, the others right-aligned.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n|", header.join(" | "));
    for i in 0..header.len() {
        out.push_str(if i == 0 { "---|" } else { "---:|" });
    }
    out.push('\n');
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_a_table() {
        let t = super::table(&["server", "req/s"], &[vec!["amped".into(), "100".into()]]);
        assert_eq!(t, "| server | req/s |\n|---|---:|\n| amped | 100 |\n");
    }
}
