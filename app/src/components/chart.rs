//! The idempotency chart: keyed requests and replays per minute over the last hour, drawn as
//! an SVG bar chart by the app (no chart library: it is sixty bars and two axes).

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

/// One bar of the chart, computed from a minute point.
struct Bar {
    x: f64,
    keyed_y: f64,
    keyed_h: f64,
    replay_y: f64,
    replay_h: f64,
    label: String,
}

fn bars(series: &[MinutePoint], now_ms: i64, ceiling: i64) -> Vec<Bar> {
    let end = now_ms.div_euclid(60_000);
    let start = end - (MINUTES - 1);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let bw = plot_w / MINUTES as f64;
    series
        .iter()
        .filter(|p| p.minute >= start && p.minute <= end)
        .map(|p| {
            let kh = plot_h * p.keyed as f64 / ceiling as f64;
            let rh = plot_h * p.replays as f64 / ceiling as f64;
            Bar {
                x: LEFT + (p.minute - start) as f64 * bw + 1.0,
                keyed_y: TOP + plot_h - kh,
                keyed_h: kh,
                replay_y: TOP + plot_h - rh,
                replay_h: rh,
                label: format!(
                    "{}: {} keyed, {} replays",
                    format::utc_time(p.minute * 60_000),
                    p.keyed,
                    p.replays
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
    let max = series.iter().map(|p| p.keyed).max().unwrap_or(0);
    let ceiling = nice_ceiling(max);
    let keyed: i64 = series.iter().map(|p| p.keyed).sum();
    let replays: i64 = series.iter().map(|p| p.replays).sum();
    let summary = format!(
        "Keyed requests and replays per minute, last hour: {keyed} keyed, {replays} replays in all."
    );
    let plot_h = H - TOP - BOTTOM;
    let bw = (W - LEFT - RIGHT) / MINUTES as f64 - 2.0;
    let bars = bars(&series, now_ms, ceiling);
    let base = TOP + plot_h;
    let mid = TOP + plot_h / 2.0;
    view! {
        <figure class="chart">
            <svg
                viewBox=format!("0 0 {W} {H}")
                role="img"
                aria-label=summary.clone()
                data-testid="hit-chart"
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
                <text class="tick" x=LEFT y=H - 4.0 text-anchor="start">"−60 min"</text>
                <text class="tick" x=LEFT + (W - LEFT - RIGHT) / 2.0 y=H - 4.0 text-anchor="middle">
                    "−30 min"
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
                "keyed requests "
                <span class="key key-replay"></span>
                "replays (per minute, UTC)"
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
        let series = vec![
            MinutePoint {
                minute: 30,
                keyed: 4,
                replays: 1,
            },
            MinutePoint {
                minute: 41,
                keyed: 4,
                replays: 2,
            },
            MinutePoint {
                minute: 100,
                keyed: 2,
                replays: 0,
            },
        ];
        let b = bars(&series, now, 4);
        assert_eq!(b.len(), 2);
        assert!(b[0].keyed_h > b[1].keyed_h);
        assert!(b[1].x < W);
    }
}
