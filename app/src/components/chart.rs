//! The dashboard's charts, drawn as SVG bar charts by the app (no chart library: sixty bars
//! and two axes): Idempotency-Key requests and replays per minute over the last hour, and a
//! connector's charge attempts and undecidable answers per minute or per hour.

use leptos::prelude::*;

use crate::dto::MinutePoint;
use crate::format;

const W: f64 = 640.0;
const H: f64 = 150.0;
const LEFT: f64 = 34.0;
const RIGHT: f64 = 6.0;
const TOP: f64 = 8.0;
const BOTTOM: f64 = 20.0;
const MINUTES: i64 = 60;

/// A round upper bound for the y axis (1, 2, 5, 10, 20, 50, ...), at least `max`.
fn nice_ceiling(max: i64) -> i64 {
    let mut step = 1i64;
    loop {
        for m in [1, 2, 5] {
            if step.saturating_mul(m) >= max {
                return step.saturating_mul(m).max(1);
            }
        }
        step = step.saturating_mul(10);
    }
}

/// One slot of a [`BarChart`]: a total and the part of it drawn over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChartPoint {
    /// The slot's start, epoch ms UTC (a whole minute or hour).
    pub start: i64,
    /// The total (the blue bar).
    pub total: i64,
    /// The part of it (the orange bar, drawn over the total).
    pub part: i64,
}

/// One bar of the chart, computed from a point.
struct Bar {
    x: f64,
    keyed_y: f64,
    keyed_h: f64,
    replay_y: f64,
    replay_h: f64,
    label: String,
}

/// The bars of `series` in the `slots` slots of `slot_ms` ending with the one holding
/// `now_ms`; points outside are dropped.
fn bars(
    series: &[ChartPoint],
    now_ms: i64,
    ceiling: i64,
    (slots, slot_ms): (i64, i64),
    names: (&str, &str),
) -> Vec<Bar> {
    let end = now_ms.div_euclid(slot_ms);
    let start = end - (slots - 1);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let bw = plot_w / slots as f64;
    series
        .iter()
        .filter(|p| (start..=end).contains(&p.start.div_euclid(slot_ms)))
        .map(|p| {
            let kh = plot_h * p.total as f64 / ceiling as f64;
            let rh = plot_h * p.part as f64 / ceiling as f64;
            Bar {
                x: LEFT + (p.start.div_euclid(slot_ms) - start) as f64 * bw + 1.0,
                keyed_y: TOP + plot_h - kh,
                keyed_h: kh,
                replay_y: TOP + plot_h - rh,
                replay_h: rh,
                label: format!(
                    "{}: {} {}, {} {}",
                    format::utc_time(p.start),
                    p.total,
                    names.0,
                    p.part,
                    names.1
                ),
            }
        })
        .collect()
}

/// Keyed requests (blue) and replays (orange) per minute, the last 60 minutes up to `now_ms`.
#[component]
pub fn HitChart(
    /// Minutes with requests (others are zero).
    series: Vec<MinutePoint>,
    /// The end of the window (the dashboard's `generated_at`).
    now_ms: i64,
) -> impl IntoView {
    let keyed: i64 = series.iter().map(|p| p.keyed).sum();
    let replays: i64 = series.iter().map(|p| p.replays).sum();
    let points = series
        .iter()
        .map(|p| ChartPoint {
            start: p.minute * 60_000,
            total: p.keyed,
            part: p.replays,
        })
        .collect();
    view! {
        <BarChart
            points
            now_ms
            summary=format!(
                "Keyed requests and replays per minute, last hour: {keyed} keyed, {replays} replays in all."
            )
            testid="hit-chart"
            names=("keyed", "replays")
            legend=("keyed requests ", "replays (per minute, UTC)")
        />
    }
}

/// A bar chart of a total (blue) and a part of it (orange) per slot, drawn as SVG in the page:
/// per minute over the last hour (`hourly` false) or per hour over the last day.
#[component]
pub fn BarChart(
    /// Slots with something in them (others are zero).
    points: Vec<ChartPoint>,
    /// The end of the window (the dashboard's `generated_at`).
    now_ms: i64,
    /// What the chart says, for a screen reader (its `aria-label`).
    summary: String,
    /// The SVG's `data-testid`.
    testid: &'static str,
    /// The names of the total and the part in a bar's tooltip.
    names: (&'static str, &'static str),
    /// The legend's words after the blue key and after the orange key.
    legend: (&'static str, &'static str),
    /// 24 hourly slots instead of 60 minutes.
    #[prop(optional)]
    hourly: bool,
) -> impl IntoView {
    let (slots, slot_ms, ticks) = if hourly {
        (24, 3_600_000, ("−24 h", "−12 h"))
    } else {
        (MINUTES, 60_000, ("−60 min", "−30 min"))
    };
    let max = points.iter().map(|p| p.total).max().unwrap_or(0);
    let ceiling = nice_ceiling(max);
    let plot_h = H - TOP - BOTTOM;
    let bw = (W - LEFT - RIGHT) / slots as f64 - 2.0;
    let bars = bars(&points, now_ms, ceiling, (slots, slot_ms), names);
    let base = TOP + plot_h;
    let mid = TOP + plot_h / 2.0;
    view! {
        <figure class="chart">
            <svg
                viewBox=format!("0 0 {W} {H}")
                role="img"
                aria-label=summary.clone()
                data-testid=testid
                preserveAspectRatio="none"
            >
                <line class="gridline" x1=LEFT y1=TOP x2=W - RIGHT y2=TOP></line>
                <line class="gridline" x1=LEFT y1=mid x2=W - RIGHT y2=mid></line>
                <line class="axis" x1=LEFT y1=base x2=W - RIGHT y2=base></line>
                <text class="tick" x=LEFT - 4.0 y=TOP + 4.0 text-anchor="end">{ceiling}</text>
                <text class="tick" x=LEFT - 4.0 y=mid + 4.0 text-anchor="end">
                    {if ceiling % 2 == 0 { (ceiling / 2).to_string() } else { String::new() }}
                </text>
                <text class="tick" x=LEFT - 4.0 y=base + 4.0 text-anchor="end">"0"</text>
                <text class="tick" x=LEFT y=H - 4.0 text-anchor="start">{ticks.0}</text>
                <text class="tick" x=LEFT + (W - LEFT - RIGHT) / 2.0 y=H - 4.0 text-anchor="middle">
                    {ticks.1}
                </text>
                <text class="tick" x=W - RIGHT y=H - 4.0 text-anchor="end">"now"</text>
                {bars
                    .into_iter()
                    .map(|b| {
                        view! {
                            <g>
                                <rect class="bar-keyed" x=b.x y=b.keyed_y width=bw height=b.keyed_h>
                                    <title>{b.label.clone()}</title>
                                </rect>
                                <rect class="bar-replay" x=b.x y=b.replay_y width=bw height=b.replay_h>
                                    <title>{b.label}</title>
                                </rect>
                            </g>
                        }
                    })
                    .collect_view()}
            </svg>
            <figcaption>
                <span class="key key-keyed"></span>
                {legend.0}
                <span class="key key-replay"></span>
                {legend.1}
            </figcaption>
        </figure>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_are_round_and_cover_the_maximum() {
        assert_eq!(nice_ceiling(0), 1);
        assert_eq!(nice_ceiling(1), 1);
        assert_eq!(nice_ceiling(3), 5);
        assert_eq!(nice_ceiling(11), 20);
        assert_eq!(nice_ceiling(500), 500);
        assert!(nice_ceiling(i64::MAX) > 0);
    }

    #[test]
    fn bars_outside_the_hour_are_dropped() {
        let now = 100 * 60_000;
        let point = |minute: i64, total, part| ChartPoint {
            start: minute * 60_000,
            total,
            part,
        };
        let series = vec![point(30, 4, 1), point(41, 4, 2), point(100, 2, 0)];
        let b = bars(&series, now, 4, (MINUTES, 60_000), ("keyed", "replays"));
        assert_eq!(b.len(), 2);
        assert!(b[0].keyed_h > b[1].keyed_h);
        assert!(b[1].x < W);
    }

    #[test]
    fn hourly_bars_cover_the_day() {
        let now = 48 * 3_600_000 + 5;
        let point = |hour: i64| ChartPoint {
            start: hour * 3_600_000,
            total: 3,
            part: 1,
        };
        let b = bars(
            &[point(24), point(25), point(48)],
            now,
            5,
            (24, 3_600_000),
            ("attempts", "undecidable"),
        );
        assert_eq!(
            b.len(),
            2,
            "hour 24 is outside the 24 hours ending with hour 48"
        );
        assert!(
            b[0].label.ends_with("3 attempts, 1 undecidable"),
            "{}",
            b[0].label
        );
    }
}
