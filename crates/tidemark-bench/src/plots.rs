//! Plots of the peer comparisons, drawn to SVG with plotters: per-second
//! throughput timelines (cache pressure) and commits/s against threads
//! (WAL scaling), one line per engine.

use std::path::Path;

use plotters::prelude::*;
use serde_json::Value;

use crate::{msg, BoxResult};

const COLORS: [RGBColor; 9] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(23, 190, 207),
];

fn err<E: std::fmt::Display>(e: E) -> Box<dyn std::error::Error + Send + Sync> {
    msg(&format!("plot: {e}"))
}

/// One line per engine of `per_sec` (ops in each second).
pub fn timelines(path: &Path, results: &[Value]) -> BoxResult<()> {
    let series: Vec<(String, Vec<f64>)> = results
        .iter()
        .map(|r| {
            let name = r["engine"].as_str().unwrap_or("?").to_string();
            let v = r["per_sec"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            (name, v)
        })
        .collect();
    let secs = series.iter().map(|s| s.1.len()).max().unwrap_or(1).max(1);
    let top = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Cache pressure: inserts per second, 10 MB cache",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..secs as f64, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .y_desc("inserts/s")
        .draw()
        .map_err(err)?;
    for (i, (name, v)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                v.iter().enumerate().map(|(x, y)| (x as f64 + 1.0, *y)),
                c.stroke_width(2),
            ))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Commits/s against threads (log2 axis), one line per engine.
pub fn scaling(path: &Path, results: &[Value]) -> BoxResult<()> {
    let series: Vec<(String, Vec<(f64, f64)>)> = results
        .iter()
        .map(|r| {
            let name = r["engine"].as_str().unwrap_or("?").to_string();
            let pts = r["points"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|p| {
                            Some((
                                (p["threads"].as_f64()?).log2(),
                                p["commits_per_sec"].as_f64()?,
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default();
            (name, pts)
        })
        .collect();
    let top = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.1;
    let xmax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "WAL scaling: commits per second, fsync per commit",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xmax, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("threads")
        .x_label_formatter(&|x| format!("{}", 2f64.powf(*x).round()))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .y_desc("commits/s")
        .draw()
        .map_err(err)?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
