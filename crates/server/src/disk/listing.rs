//! Directory listings (`--listing`): an HTML page of a directory's entries, every name
//! HTML-escaped and percent-encoded in links. Reads the directory, so it runs inside a job.

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use std::path::Path;

const PATH_SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'/')
    .add(b'\\')
    .add(b'\'');

/// Renders the listing of `dir`, reached as `url_path` (ends in `/`). A directory that
/// cannot be opened is an error (answered by the table in [`super::fs_error`]), never an
/// empty listing.
pub fn render(dir: &Path, url_path: &str, dotfiles: bool) -> std::io::Result<Vec<u8>> {
    let mut names: Vec<(String, bool)> = amped_sys::files::read_dir(dir)?
        .into_iter()
        .filter_map(|(name, is_dir)| Some((name.into_string().ok()?, is_dir)))
        .filter(|(n, _)| dotfiles || !n.starts_with('.'))
        .collect();
    names.sort();
    let title = amped_http::html_escape(url_path);
    // Sized for the whole page at once: growing it by doubling would leave freed blocks of
    // every size up to the page's behind in the helper's heap.
    let guess: usize = names.iter().map(|(n, _)| 2 * n.len() + 40).sum::<usize>() + 256;
    let mut page = String::with_capacity(guess);
    page += &format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n<body><h1>Index of {title}</h1>\n<ul>\n"
    );
    if url_path != "/" {
        page.push_str("<li><a href=\"../\">../</a></li>\n");
    }
    for (name, is_dir) in names {
        let slash = if is_dir { "/" } else { "" };
        let href = utf8_percent_encode(&name, PATH_SEGMENT);
        page.push_str(&format!(
            "<li><a href=\"{href}{slash}\">{}{slash}</a></li>\n",
            amped_http::html_escape(&name)
        ));
    }
    page.push_str("</ul></body></html>\n");
    if page.len() >= BIG_PAGE {
        // The directory's names are freed by now: give their pages back to the kernel.
        amped_sys::memory::trim_heap();
    }
    Ok(page.into_bytes())
}

/// A listing at least this large gives freed heap back to the kernel once rendered.
const BIG_PAGE: usize = 1 << 20;

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_escaped_and_encoded() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("<b>&x y.txt"), "").unwrap();
        std::fs::write(d.path().join(".hidden"), "").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let page = String::from_utf8(super::render(d.path(), "/d/", false).unwrap()).unwrap();
        assert!(page.contains("<a href=\"%3Cb%3E&x%20y.txt\">&lt;b&gt;&amp;x y.txt</a>"), "{page}");
        assert!(page.contains("<a href=\"sub/\">sub/</a>"));
        assert!(!page.contains("hidden"));
    }
}
