//! The HTML report of `allot_verify::report`, made from real audits of a week of
//! jobs scheduled two ways ("budget policy": fair share by budget; "priority baseline":
//! first come, first served), is checked as text (one SVG per chart with its title, no
//! remote reference, names escaped, the same bytes twice) and then rendered by a real
//! headless Chromium (`scripts/chromium.sh`): the screenshot decodes, has the size asked
//! for, is not blank, and shows the runs' series colours.
//!
//! Chromium comes from Debian's package (installed when missing, as root with apt);
//! elsewhere the browser part says so loudly and is skipped, unless `ALLOT_REQUIRE_CHROMIUM`
//! is set, when it fails. `ALLOT_REPORT_SCREENSHOTS=DIR` keeps the pages and screenshots in
//! DIR to look at (they are otherwise in a temporary folder, removed).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use allot_compiler::test_support::model;
use allot_verify::audit::audit;
use allot_verify::figures::Audit;
use allot_verify::report::{html, markdown_charts};
use allot_verify::trace::{Format, Reader};

use crate::common::root;

const GPUS: u32 = 16;
const BUDGETS: &str = "cluster gpu gpus=16 gpu-type=h100 gpus-per-node=8\n\
    contract batch min-runtime=\"1h\" default=#true\n\
    contract debug min-runtime=\"0s\" max-runtime=\"1h\"\n\
    project research share=3 {\n    project vision share=1\n    project language share=2\n}\n\
    project infra share=1\nproject web share=1\n";
/// 2025-03-03T00:00:00Z: the trace's first day.
const MONDAY: i64 = 1_740_960_000;
const DAY: i64 = 86_400;
/// A budget renamed after the audit, as a user could name one: it must reach the page escaped.
const HOSTILE: &str = "<web & co>";
const CHART_IDS: [&str; 4] = ["chart-usage", "chart-delivered", "chart-waits", "chart-utilisation"];
const CHART_TITLES: [&str; 4] = [
    "Used and entitled GPU-hours per window",
    "Delivered ratio per budget",
    "Wait distribution per contract",
    "Cluster utilisation per window",
];
/// The series colours of the first two runs (the report's palette).
const BLUE: [u8; 3] = [0x1f, 0x77, 0xb4];
const ORANGE: [u8; 3] = [0xff, 0x7f, 0x0e];
const SIZE: (u32, u32) = (1280, 3200);

#[derive(Clone, Debug)]
struct Submission {
    id: usize,
    project: &'static str,
    gpus: u32,
    submit: i64,
    duration: i64,
    contract: &'static str,
}

/// A week of jobs from a fixed-seed generator: mostly batch work of the four budgets, some
/// short debug jobs, and a few jobs of a project no budget knows.
fn submissions() -> Vec<Submission> {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: u64| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % n
    };
    let projects = ["research/vision", "research/language", "research/language", "infra", "web", "web"];
    let mut submit = MONDAY;
    (0..250)
        .map(|id| {
            submit += 300 + next(4_200) as i64;
            let debug = next(5) == 0;
            let project =
                if id % 57 == 13 { "stranger" } else { projects[next(projects.len() as u64) as usize] };
            Submission {
                id,
                project,
                gpus: if debug { 1 } else { [1, 2, 4, 8][next(4) as usize] },
                submit,
                duration: if debug { 300 + next(1_500) as i64 } else { 1_800 + next(6 * 3_600) as i64 },
                contract: if debug { "debug" } else { "batch" },
            }
        })
        .collect()
}

/// Runs the jobs on `GPUS` GPUs: at every event, the waiting jobs are taken in the order of
/// `rank` (lowest first) and every one that fits starts. Returns the trace as CSV.
fn schedule(jobs: &[Submission], rank: impl Fn(&Submission, &[(String, f64)]) -> f64) -> String {
    let (mut waiting, mut running): (Vec<&Submission>, Vec<(i64, u32)>) = (Vec::new(), Vec::new());
    let mut used: Vec<(String, f64)> = Vec::new();
    let mut started: Vec<(usize, i64)> = Vec::new();
    let mut arrivals = jobs.iter().peekable();
    let mut now = MONDAY;
    while arrivals.peek().is_some() || !waiting.is_empty() {
        let next_arrival = arrivals.peek().map_or(i64::MAX, |j| j.submit);
        let next_end = running.iter().map(|r| r.0).min().unwrap_or(i64::MAX);
        now = now.max(next_arrival.min(next_end));
        while let Some(job) = arrivals.next_if(|j| j.submit <= now) {
            waiting.push(job);
        }
        running.retain(|r| r.0 > now);
        waiting.sort_by(|a, b| rank(a, &used).total_cmp(&rank(b, &used)).then(a.submit.cmp(&b.submit)));
        let mut free = GPUS - running.iter().map(|r| r.1).sum::<u32>();
        waiting.retain(|job| {
            if job.gpus > free {
                return true;
            }
            free -= job.gpus;
            running.push((now + job.duration, job.gpus));
            started.push((job.id, now));
            let hours = f64::from(job.gpus) * job.duration as f64 / 3_600.0;
            match used.iter_mut().find(|(p, _)| p == job.project) {
                Some(slot) => slot.1 += hours,
                None => used.push((job.project.to_string(), hours)),
            }
            false
        });
    }
    let mut csv = String::from("id,project,gpus,submit,start,end,contract\n");
    for job in jobs {
        let start = started.iter().find(|s| s.0 == job.id).map(|s| s.1).unwrap_or(job.submit);
        csv.push_str(&format!(
            "{},{},{},{},{},{},{}\n",
            job.id,
            job.project,
            job.gpus,
            job.submit,
            start,
            start + job.duration,
            job.contract
        ));
    }
    csv
}

/// Budget policy: the job whose budget used least for its share goes first (debug first).
fn fair_share(job: &Submission, used: &[(String, f64)]) -> f64 {
    let share = match job.project {
        "research/vision" => 1.0 / 3.0 * 0.6,
        "research/language" => 2.0 / 3.0 * 0.6,
        "infra" | "web" => 0.2,
        _ => 0.01,
    };
    let hours = used.iter().find(|(p, _)| p == job.project).map_or(0.0, |u| u.1);
    if job.contract == "debug" { -1.0 } else { hours / share }
}

fn audited(trace: &str) -> Audit {
    let model = model(BUDGETS);
    let mut reader = Reader::new(trace.as_bytes(), Format::Csv, "").unwrap();
    let mut audit = audit(&model, std::iter::from_fn(move || reader.next_job()), DAY as u64, false).unwrap();
    // Budget names cannot hold `<` (they must be portable); a report must escape them anyway.
    for span in std::iter::once(&mut audit.whole).chain(&mut audit.windows) {
        for budget in span.budgets.iter_mut().filter(|b| b.project == "web") {
            budget.project = HOSTILE.to_string();
        }
    }
    for leaf in audit.leaves.iter_mut().filter(|l| *l == "web") {
        *leaf = HOSTILE.to_string();
    }
    audit.leaves.sort();
    audit
}

fn runs() -> (Audit, Audit) {
    let jobs = submissions();
    (audited(&schedule(&jobs, fair_share)), audited(&schedule(&jobs, |_, _| 0.0)))
}

/// The markup of the SVG with this id.
fn svg_of<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page.find(&format!("<svg id=\"{id}\"")).unwrap_or_else(|| panic!("no <svg id=\"{id}\">"));
    let end = page[start..].find("</svg>").unwrap_or_else(|| panic!("{id} is not closed"));
    &page[start..start + end]
}

fn check_page(page: &str, runs: usize) {
    assert_eq!(page.matches("<svg").count(), CHART_IDS.len(), "one <svg> per chart");
    for (id, title) in CHART_IDS.iter().zip(CHART_TITLES) {
        let svg = svg_of(page, id);
        assert!(svg.contains(&format!(">\n{title}")), "{id} has no visible title `{title}`");
        assert!(svg.contains("<text"), "{id} has no text");
        assert!(svg.contains("<rect") || svg.contains("<polyline"), "{id} draws nothing");
        let section = &page[page.find(&format!("<svg id=\"{id}\"")).unwrap_or(0)..];
        assert!(section.contains("</svg>\n<figcaption>"), "{id} has no caption");
    }
    // Axes are described and the budgets named.
    let usage = svg_of(page, "chart-usage");
    // The time axis starts at the first window, which starts at the first submission (a few
    // minutes into Monday, 2025-03-03).
    for text in ["GPU-hours", "days since 2025-03-03 00:", "vision", "language", "infra"] {
        assert!(usage.contains(text), "the usage chart lacks `{text}`");
    }
    assert!(svg_of(page, "chart-delivered").contains("delivered / entitled GPU-hours"));
    assert!(svg_of(page, "chart-waits").contains("batch") && svg_of(page, "chart-waits").contains("debug"));
    assert!(svg_of(page, "chart-utilisation").contains("utilisation"));
    assert_eq!(page.matches("<table class=\"budgets\">").count(), runs);

    // Self-contained: nothing to fetch, no script; the SVG namespace is the only address.
    let addresses = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for remote in ["http://", "https://", "<script", "<link", "src=", "@import", "url("] {
        assert!(!addresses.contains(remote), "the page holds `{remote}`");
    }
    // Escaped everywhere: tables, headline and (by plotters) chart labels.
    assert!(!page.contains(HOSTILE) && !page.contains("<web"), "a name reached the page unescaped");
    assert!(page.contains("&lt;web &amp; co&gt;"), "the escaped name is missing");
}

#[test]
fn the_page_is_self_contained_and_escaped() {
    let (policy, baseline) = runs();
    let one = html("Audit: week 10", &[("budget policy", &policy)]);
    check_page(&one, 1);
    let two = html(
        "Budget policy against priority baseline",
        &[("budget policy", &policy), ("priority baseline", &baseline)],
    );
    check_page(&two, 2);
    assert!(two.contains("budget policy: used") && two.contains("priority baseline: entitled"));
    assert_eq!(
        two,
        html(
            "Budget policy against priority baseline",
            &[("budget policy", &policy), ("priority baseline", &baseline)]
        )
    );
    let markdown = markdown_charts(&[("budget policy", &policy), ("priority baseline", &baseline)]);
    assert_eq!(markdown.matches("```mermaid\n").count(), 2, "{markdown}");
    assert!(!markdown.contains('<') && !markdown.contains('&'), "{markdown}");
}

/// The pixels of a PNG as RGB, with its size.
fn decode(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("the screenshot is a PNG");
    let mut buffer = vec![0; reader.output_buffer_size().expect("a sane PNG size")];
    let frame = reader.next_frame(&mut buffer).expect("the screenshot decodes");
    let channels = match frame.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        other => panic!("unexpected colour type {other:?}"),
    };
    let pixels = buffer[..frame.buffer_size()]
        .chunks_exact(channels)
        .map(|p| if channels >= 3 { [p[0], p[1], p[2]] } else { [p[0]; 3] })
        .collect();
    (frame.width, frame.height, pixels)
}

fn near(pixel: [u8; 3], colour: [u8; 3]) -> bool {
    pixel.iter().zip(colour).all(|(&a, b)| a.abs_diff(b) <= 12)
}

/// Runs `scripts/chromium.sh` with the temporary folder as its TMPDIR (so its processes can
/// be told apart from any other Chromium's).
fn chromium(args: &[&str], tmp: &Path) -> std::process::Output {
    Command::new("scripts/chromium.sh")
        .args(args)
        .env("TMPDIR", tmp)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("scripts/chromium.sh: {e}"))
}

/// Processes whose command line mentions `path`.
fn processes_using(path: &Path) -> Vec<String> {
    let needle = path.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
                .filter_map(|e| {
                    let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
                    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                    cmdline
                        .contains(&needle)
                        .then(|| format!("{}: {cmdline}", e.file_name().to_string_lossy()))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn chromium_renders_the_charts() {
    let folder = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let ensure = chromium(&["ensure"], folder.path());
    match ensure.status.code() {
        Some(0) => eprintln!(
            "chromium: {} ({:.1} s to ensure)",
            String::from_utf8_lossy(&ensure.stdout).trim(),
            started.elapsed().as_secs_f64()
        ),
        Some(3) if std::env::var_os("ALLOT_REQUIRE_CHROMIUM").is_none() => {
            eprintln!("skipped: no headless Chromium here:\n{}", String::from_utf8_lossy(&ensure.stderr));
            return;
        }
        _ => panic!("scripts/chromium.sh ensure failed:\n{}", String::from_utf8_lossy(&ensure.stderr)),
    }

    let (policy, baseline) = runs();
    let pages = [
        ("one-run", html("Audit: week 10", &[("budget policy", &policy)]), vec![BLUE]),
        (
            "two-runs",
            html(
                "Budget policy against priority baseline",
                &[("budget policy", &policy), ("priority baseline", &baseline)],
            ),
            vec![BLUE, ORANGE],
        ),
    ];
    for (name, page, colours) in pages {
        let page_path = folder.path().join(format!("{name}.html"));
        let png_path = folder.path().join(format!("{name}.png"));
        std::fs::write(&page_path, &page).unwrap();
        let started = Instant::now();
        let output = chromium(
            &[
                "screenshot",
                &page_path.to_string_lossy(),
                &png_path.to_string_lossy(),
                &SIZE.0.to_string(),
                &SIZE.1.to_string(),
            ],
            folder.path(),
        );
        assert!(
            output.status.success(),
            "screenshot of {name} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        eprintln!("{name}: screenshot in {:.1} s", started.elapsed().as_secs_f64());
        let left = processes_using(folder.path());
        assert!(left.is_empty(), "Chromium processes still running: {left:?}");
        if let Some(keep) = std::env::var_os("ALLOT_REPORT_SCREENSHOTS") {
            std::fs::create_dir_all(&keep).unwrap();
            for path in [&page_path, &png_path] {
                std::fs::copy(path, Path::new(&keep).join(path.file_name().unwrap())).unwrap();
            }
        }

        let (width, height, pixels) = decode(&png_path);
        assert_eq!((width, height), SIZE, "{name}: the screenshot's size");
        // Not blank: text, axes, bars and lines cover a good part of the page.
        let inked = pixels.iter().filter(|p| p.iter().any(|&c| c < 200)).count();
        let share = inked as f64 / pixels.len() as f64;
        assert!(share > 0.02, "{name}: only {:.2}% of the pixels are drawn", share * 100.0);
        // Every run's series colour is drawn, in quantity (bars, lines and legend marks).
        for colour in &colours {
            let count = pixels.iter().filter(|&&p| near(p, *colour)).count();
            assert!(count > 5_000, "{name}: {count} pixels of the series colour {colour:?}");
        }
        // And the page is in colour: several distinct saturated colours, each on many pixels.
        let mut hues = std::collections::BTreeMap::new();
        for p in &pixels {
            let (max, min) = (*p.iter().max().unwrap_or(&0), *p.iter().min().unwrap_or(&0));
            if max - min > 60 {
                *hues.entry([p[0] / 32, p[1] / 32, p[2] / 32]).or_insert(0_usize) += 1;
            }
        }
        let distinct = hues.values().filter(|&&n| n > 500).count();
        assert!(distinct >= colours.len(), "{name}: only {distinct} distinct colours: {hues:?}");
        // The charts are where the page put them: each chart's band of the image has ink.
        let bands = 8;
        let band_height = (height as usize).div_ceil(bands);
        let blank_bands: Vec<usize> = (0..bands)
            .filter(|b| {
                let rows = pixels.chunks(width as usize).skip(b * band_height).take(band_height);
                rows.flatten().filter(|p| p.iter().any(|&c| c < 200)).count() < 200
            })
            .collect();
        assert!(blank_bands.len() <= 2, "{name}: blank bands of the screenshot: {blank_bands:?}");
    }
}
