//! Content-Type for a file, by extension (mime_guess), with a charset for textual types.
//!
//! Textual types get "; charset=utf-8" so browsers do not guess an encoding (and cannot be talked
//! into a dangerous one); unknown extensions are served as opaque bytes.

use std::path::Path;

/// Non-`text/*` types that are text too and therefore get a charset.
const TEXTUAL: &[&str] =
    &["application/javascript", "application/json", "application/xml", "image/svg+xml"];

/// Content-Type for a file path; unknown → "application/octet-stream".
pub fn content_type_for(path: &Path) -> String {
    let Some(mime) = mime_guess::from_path(path).first() else {
        return "application/octet-stream".to_owned();
    };
    let essence = mime.essence_str();
    if mime.type_() == mime_guess::mime::TEXT || TEXTUAL.contains(&essence) {
        format!("{essence}; charset=utf-8")
    } else {
        essence.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        let cases = [
            ("index.html", "text/html; charset=utf-8"),
            ("style.css", "text/css; charset=utf-8"),
            ("notes.txt", "text/plain; charset=utf-8"),
            ("data.json", "application/json; charset=utf-8"),
            ("feed.xml", "text/xml; charset=utf-8"),
            ("logo.svg", "image/svg+xml; charset=utf-8"),
            ("photo.JPG", "image/jpeg"),
            ("image.png", "image/png"),
            ("paper.pdf", "application/pdf"),
            ("dir/no_extension", "application/octet-stream"),
            ("blob.unknownext", "application/octet-stream"),
        ];
        for (path, expected) in cases {
            assert_eq!(content_type_for(Path::new(path)), expected, "{path}");
        }
        let js = content_type_for(Path::new("app.js"));
        assert!(js.ends_with("/javascript; charset=utf-8"), "{js}");
    }
}
