//! PNG files of the charts (`numalab report --png DIR`, docs/report.md): the SVG a chart is
//! drawn as, rasterised with resvg at twice its size. The labels need a font: the system's
//! fonts are searched once, and the charts' generic `sans-serif` is mapped to the first of
//! DejaVu Sans, Liberation Sans, Noto Sans, Arial found, else to any family there is. PNG
//! bytes therefore depend on the fonts installed; the SVG and HTML do not.

use crate::error::{ReportError, Result};
use resvg::{tiny_skia, usvg};

/// Preferred families for the charts' `sans-serif` text, in order.
const SANS: &[&str] = &["DejaVu Sans", "Liberation Sans", "Noto Sans", "Arial"];

/// Pixels per SVG unit.
const SCALE: f32 = 2.0;

/// The fonts PNG output draws text with.
pub struct Fonts {
    options: usvg::Options<'static>,
}

impl Fonts {
    /// The system's fonts (fontconfig's directories and the usual font folders).
    pub fn system() -> Result<Fonts> {
        let mut options = usvg::Options::default();
        options.fontdb_mut().load_system_fonts();
        Fonts::choose(options, "the system's font directories")
    }

    /// The fonts in these directories only (tests, and systems with fonts elsewhere).
    pub fn from_dirs(dirs: &[std::path::PathBuf]) -> Result<Fonts> {
        let mut options = usvg::Options::default();
        for d in dirs {
            options.fontdb_mut().load_fonts_dir(d);
        }
        let searched = dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ");
        Fonts::choose(options, &searched)
    }

    fn choose(mut options: usvg::Options<'static>, searched: &str) -> Result<Fonts> {
        let families: Vec<String> = options.fontdb.faces().flat_map(|f| f.families.iter().map(|(n, _)| n.clone())).collect();
        let family = SANS.iter().find(|s| families.iter().any(|f| f == *s)).map(|s| s.to_string()).or_else(|| {
            let mut sorted = families.clone();
            sorted.sort();
            sorted.into_iter().next()
        });
        let Some(family) = family else { return Err(ReportError::NoFonts { searched: searched.to_string() }) };
        options.fontdb_mut().set_sans_serif_family(family);
        Ok(Fonts { options })
    }
}

/// One chart's SVG as PNG bytes.
pub fn png(chart: &str, svg: &str, fonts: &Fonts) -> Result<Vec<u8>> {
    let draw = |message: String| ReportError::Draw { chart: chart.to_string(), message };
    let tree = usvg::Tree::from_str(svg, &fonts.options).map_err(|e| draw(format!("the SVG does not parse: {e}")))?;
    let size = tree.size().to_int_size().scale_by(SCALE).ok_or_else(|| draw("the chart has no size".into()))?;
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).ok_or_else(|| draw("the chart has no size".into()))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::from_scale(SCALE, SCALE), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| draw(format!("PNG encoding failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SVG: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect x="0" y="0" width="20" height="20" fill="#ff0000"/><text x="22" y="15" font-family="sans-serif" font-size="10">A</text></svg>"##;

    #[test]
    fn no_font_is_a_clear_error() {
        let empty = tempfile::tempdir().unwrap();
        let e = Fonts::from_dirs(&[empty.path().to_path_buf()]).err().expect("no fonts");
        let msg = e.to_string();
        assert!(msg.starts_with("PNG output needs a TrueType or OpenType font"), "{msg}");
        assert!(msg.contains(&empty.path().display().to_string()), "{msg}");
    }

    #[test]
    fn a_chart_becomes_a_png_twice_its_size() {
        // Where the machine has no fonts at all this cannot run; CI has Chromium's fonts.
        let Ok(fonts) = Fonts::system() else { return };
        let bytes = png("t", SVG, &fonts).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width and height, big-endian, at bytes 16..24.
        assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 80);
        assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 40);
        let bad = png("t", "<svg", &fonts).err().unwrap().to_string();
        assert!(bad.starts_with("cannot draw chart t: the SVG does not parse"), "{bad}");
    }
}
