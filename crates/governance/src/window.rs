//! Budget windows: calendar periods in UTC (a day starts at midnight, a
//! week on Monday, a month on the 1st) or the key's whole life. Spend in a
//! window is what the ledger holds between its start and now.

use serde::{Deserialize, Serialize};
use time::{Date, OffsetDateTime, Time};

/// A budget window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Window {
    /// The current UTC minute.
    #[serde(rename = "1m")]
    Minute,
    /// The current UTC hour.
    #[serde(rename = "1h")]
    Hour,
    /// The current UTC day.
    #[serde(rename = "1d")]
    Day,
    /// The current ISO week (from Monday 00:00 UTC).
    #[serde(rename = "7d")]
    Week,
    /// The current calendar month (from the 1st, 00:00 UTC).
    #[serde(rename = "1mo")]
    Month,
    /// Everything, ever.
    #[serde(rename = "total")]
    Total,
}

impl Window {
    /// Every window with its config name.
    pub const ALL: [(Window, &'static str); 6] = [
        (Window::Minute, "1m"),
        (Window::Hour, "1h"),
        (Window::Day, "1d"),
        (Window::Week, "7d"),
        (Window::Month, "1mo"),
        (Window::Total, "total"),
    ];

    /// Parses a config name.
    pub fn from_name(name: &str) -> Option<Window> {
        Window::ALL.iter().find(|(_, n)| *n == name).map(|(w, _)| *w)
    }

    /// The config name.
    pub fn as_str(self) -> &'static str {
        Window::ALL.iter().find(|(w, _)| *w == self).map_or("total", |(_, n)| n)
    }

    /// Start (Unix seconds) of the window holding `now` (Unix seconds).
    ///
    /// Unix time counts every day as 86,400 seconds, so all but a month's
    /// start are integer arithmetic (admission asks for each quota's
    /// window twice a request; a calendar conversion is the dear part).
    pub fn start(self, now: i64) -> i64 {
        if !(CALENDAR.0..=CALENDAR.1).contains(&now) {
            return 0;
        }
        const DAY: i64 = 86_400;
        match self {
            Window::Total => 0,
            Window::Minute => now - now.rem_euclid(60),
            Window::Hour => now - now.rem_euclid(3600),
            Window::Day => now - now.rem_euclid(DAY),
            // 1970-01-01 was a Thursday: three days after a Monday.
            Window::Week => (now.div_euclid(DAY) - (now.div_euclid(DAY) + 3).rem_euclid(7)) * DAY,
            Window::Month => OffsetDateTime::from_unix_timestamp(now)
                .ok()
                .and_then(|at| at.date().replace_day(1).ok())
                .map_or(0, midnight),
        }
    }

    /// Start (Unix seconds) of the window after the one holding `now`;
    /// `None` for `total`.
    pub fn next_start(self, now: i64) -> Option<i64> {
        let start = self.start(now);
        let at = OffsetDateTime::from_unix_timestamp(start).ok()?;
        match self {
            Window::Total => None,
            Window::Minute => Some(start + 60),
            Window::Hour => Some(start + 3600),
            Window::Day => Some(start + 86_400),
            Window::Week => Some(start + 7 * 86_400),
            Window::Month => {
                let (year, month) = (at.year(), at.month());
                let next = if month == time::Month::December {
                    Date::from_calendar_date(year + 1, time::Month::January, 1)
                } else {
                    Date::from_calendar_date(year, month.next(), 1)
                };
                next.ok().map(midnight)
            }
        }
    }
}

/// The Unix seconds the calendar reads (`time`'s range); outside it a
/// window starts at 0, as an unreadable time always did.
const CALENDAR: (i64, i64) = (-377_705_116_800, 253_402_300_799);

fn midnight(date: Date) -> i64 {
    date.with_time(Time::MIDNIGHT).assume_utc().unix_timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The start by the calendar, as it was read before the arithmetic.
    fn by_calendar(window: Window, now: i64) -> i64 {
        let Ok(at) = OffsetDateTime::from_unix_timestamp(now) else { return 0 };
        match window {
            Window::Total => 0,
            Window::Minute => now - now.rem_euclid(60),
            Window::Hour => now - now.rem_euclid(3600),
            Window::Day => midnight(at.date()),
            Window::Week => {
                midnight(at.date() - time::Duration::days(i64::from(at.weekday().number_days_from_monday())))
            }
            Window::Month => at.date().replace_day(1).map_or(0, midnight),
        }
    }

    #[test]
    fn the_calendars_range_is_the_one_time_reads() {
        assert!(OffsetDateTime::from_unix_timestamp(CALENDAR.0).is_ok());
        assert!(OffsetDateTime::from_unix_timestamp(CALENDAR.0 - 1).is_err());
        assert!(OffsetDateTime::from_unix_timestamp(CALENDAR.1).is_ok());
        assert!(OffsetDateTime::from_unix_timestamp(CALENDAR.1 + 1).is_err());
    }

    proptest! {
        #[test]
        fn the_arithmetic_start_is_the_calendars(now in -400_000_000_000i64..400_000_000_000) {
            for (window, _) in Window::ALL {
                prop_assert_eq!(window.start(now), by_calendar(window, now), "{:?} at {}", window, now);
            }
        }
    }

    /// 2026-11-30 (a Monday) 19:31:05 UTC.
    const NOW: i64 = 1_796_067_065;

    #[test]
    fn calendar_windows_in_utc() {
        assert_eq!(Window::Minute.start(NOW), NOW - 5);
        assert_eq!(Window::Hour.start(NOW), NOW - 31 * 60 - 5);
        let day = Window::Day.start(NOW);
        assert_eq!(day, 1_795_996_800, "2026-11-30 00:00 UTC");
        assert_eq!(Window::Week.start(NOW), day, "the 30th is a Monday");
        assert_eq!(Window::Week.start(NOW + 6 * 86_400), day);
        assert_eq!(Window::Week.start(NOW + 7 * 86_400), day + 7 * 86_400);
        assert_eq!(Window::Month.start(NOW), day - 29 * 86_400, "2026-11-01");
        assert_eq!(Window::Month.next_start(NOW), Some(day + 86_400), "2026-12-01");
        assert_eq!(Window::Month.next_start(Window::Month.next_start(NOW).unwrap()), Some(day + 32 * 86_400));
        assert_eq!(Window::Total.start(NOW), 0);
        assert_eq!(Window::Total.next_start(NOW), None);
        for (window, name) in Window::ALL {
            assert_eq!(Window::from_name(name), Some(window));
            assert_eq!(window.as_str(), name);
        }
    }

    proptest::proptest! {
        #[test]
        fn every_instant_lies_in_its_window(now in 0i64..4_000_000_000) {
            for (window, _) in Window::ALL {
                let start = window.start(now);
                proptest::prop_assert!(start <= now);
                if let Some(next) = window.next_start(now) {
                    proptest::prop_assert!(now < next, "{:?} {} {}", window, now, next);
                    proptest::prop_assert_eq!(window.start(next), next);
                }
            }
        }
    }
}
