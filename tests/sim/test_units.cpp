// Tests of the strong unit types (sim/units.h) and the picosecond clock conversions
// (sim/sim_time.h). Expected numbers are derived in the comments; floating-point comparisons use
// doctest::Approx with the tolerance stated next to them.
#include "sim/units.h"

#include <doctest/doctest.h>

#include <concepts>
#include <cstdint>
#include <random>
#include <type_traits>

#include "sim/sim_time.h"

namespace clustersim {
namespace {

// --- compile-time checks: only physically meaningful arithmetic compiles -------------------------
// Concepts over two types make the checks SFINAE-friendly on every compiler (a bare requires-
// expression outside a template is not portable).
template <class A, class B>
concept Addable = requires(A a, B b) { a + b; };
template <class A, class B>
concept Subtractable = requires(A a, B b) { a - b; };
template <class A, class B>
concept Multipliable = requires(A a, B b) { a * b; };
template <class A, class B>
concept Divisible = requires(A a, B b) { a / b; };
template <class A, class B>
concept Comparable = requires(A a, B b) { a < b; };
template <class A, class B, class R>
concept DividesTo = requires(A a, B b) {
  { a / b } -> std::same_as<R>;
};
template <class A, class B, class R>
concept MultipliesTo = requires(A a, B b) {
  { a * b } -> std::same_as<R>;
};

// Meaningless: adding, subtracting or comparing different dimensions.
static_assert(!Addable<Bytes, Seconds>);
static_assert(!Addable<Seconds, Bytes>);
static_assert(!Addable<Bytes, BytesPerSecond>);
static_assert(!Addable<Flops, Bytes>);
static_assert(!Subtractable<Seconds, Bytes>);
static_assert(!Comparable<Bytes, Seconds>);
// Meaningless: adding a bare number (which unit would it be in?).
static_assert(!Addable<Bytes, double>);
static_assert(!Addable<double, Seconds>);
// Meaningless products and quotients.
static_assert(!Multipliable<Bytes, Bytes>);
static_assert(!Multipliable<Bytes, Seconds>);
static_assert(!Multipliable<Bytes, BytesPerSecond>);
static_assert(!Divisible<Seconds, Bytes>);
static_assert(!Divisible<Bytes, FlopsPerSecond>);
static_assert(!Divisible<Flops, BytesPerSecond>);
static_assert(!Divisible<double, Seconds>);
// No silent conversion to or from a bare double.
static_assert(!std::is_convertible_v<double, Seconds>);
static_assert(!std::is_convertible_v<Seconds, double>);
static_assert(!std::is_convertible_v<Bytes, Seconds>);
// Meaningful: the physics of the simulator.
static_assert(Addable<Bytes, Bytes>);
static_assert(DividesTo<Bytes, BytesPerSecond, Seconds>);
static_assert(DividesTo<Flops, FlopsPerSecond, Seconds>);
static_assert(DividesTo<Bytes, Seconds, BytesPerSecond>);
static_assert(DividesTo<Flops, Seconds, FlopsPerSecond>);
static_assert(DividesTo<Bytes, Bytes, double>);  // a ratio is dimensionless
static_assert(MultipliesTo<BytesPerSecond, Seconds, Bytes>);
static_assert(MultipliesTo<Seconds, BytesPerSecond, Bytes>);
static_assert(MultipliesTo<Seconds, double, Seconds>);
static_assert(MultipliesTo<double, Bytes, Bytes>);
// The arithmetic is constexpr: 1 GB over 1 GB/s is one second, exactly (1e9 / 1e9).
static_assert((GB(1) / GBps(1)).raw() == 1.0);
static_assert(Seconds{}.raw() == 0.0);

TEST_CASE("units: decimal and binary prefixes are distinct") {
  // Exact: all these are integers below 2^53, so the doubles are exact.
  CHECK(GB(1).raw() == 1e9);                   // 10^9
  CHECK(MB(1).raw() == 1e6);                   // 10^6
  CHECK(GiB(1).raw() == 1073741824.0);         // 2^30
  CHECK(MiB(1).raw() == 1048576.0);            // 2^20
  CHECK(GiB(1) == MiB(1024));                  // 2^30 = 1024 * 2^20
  CHECK(GiB(1) != GB(1));
  CHECK(GiB(1) > GB(1));                       // 1.073741824e9 > 1e9
  CHECK(bytes(3).raw() == 3.0);
  // 1 GiB / 1 GB = 2^30 / 10^9 = 1.073741824 (tolerance 1e-15 relative: one rounding).
  CHECK(GiB(1) / GB(1) == doctest::Approx(1.073741824).epsilon(1e-15));
  CHECK(to_GiB(GiB(80)) == 80.0);              // 80 * 2^30 / 2^30, exact
  CHECK(to_GiB(GB(80)) == doctest::Approx(74.50580596923828).epsilon(1e-15));  // 8e10 / 2^30
}

TEST_CASE("units: GB/s versus Gbit/s") {
  // A byte is 8 bits: 8 Gbit/s = 8e9 / 8 = 1e9 B/s = 1 GB/s.
  CHECK(Gbitps(8) == GBps(1));
  CHECK(GBps(1).raw() == 1e9);
  // 400 Gbit/s NIC = 400e9 / 8 = 50e9 B/s = 50 GB/s (exact in double).
  CHECK(Gbitps(400).raw() == 50e9);
  CHECK(to_GBps(Gbitps(400)) == 50.0);
  // 900 GB/s NVLink (H100) is 18x a 400 Gbit/s NIC: 900e9 / 50e9 = 18.
  CHECK(GBps(900) / Gbitps(400) == doctest::Approx(18.0).epsilon(1e-15));
  CHECK(bytes_per_second(12.5e9) == Gbitps(100));  // 100e9 / 8 = 12.5e9
}

TEST_CASE("units: time named constructors") {
  // Tolerance 1e-15 relative: each constructor is one multiplication (one rounding).
  CHECK(seconds(2).raw() == 2.0);
  CHECK(milliseconds(1.5).raw() == doctest::Approx(1.5e-3).epsilon(1e-15));
  CHECK(microseconds(250).raw() == doctest::Approx(250e-6).epsilon(1e-15));
  CHECK(hours(1).raw() == 3600.0);  // 1 * 3600, exact
  CHECK(hours(0.5) == seconds(1800));
  CHECK(to_us(milliseconds(2)) == doctest::Approx(2000.0).epsilon(1e-15));  // 2e-3 * 1e6
  CHECK(to_us(microseconds(7)) == doctest::Approx(7.0).epsilon(1e-15));
}

TEST_CASE("units: Bytes / BytesPerSecond -> Seconds and back") {
  // 1 GiB over a 100 Gbit/s link: 2^30 / (100e9 / 8) = 1073741824 / 12.5e9 = 0.08589934592 s.
  const Seconds t = GiB(1) / Gbitps(100);
  CHECK(t.raw() == doctest::Approx(0.08589934592).epsilon(1e-15));
  // The same GiB at 900 GB/s: 1073741824 / 9e11 = 1.1930464711111...e-3 s.
  CHECK((GiB(1) / GBps(900)).raw() == doctest::Approx(1.1930464711111111e-3).epsilon(1e-15));
  // Rate * time gives the bytes back: 12.5e9 * 0.08589934592 = 1073741824 (tolerance 1e-15 rel).
  CHECK((Gbitps(100) * t).raw() == doctest::Approx(1073741824.0).epsilon(1e-15));
  CHECK((t * Gbitps(100)) == Gbitps(100) * t);  // the product commutes
  // Bytes / Seconds -> rate: 1 GB in 10 ms = 1e9 / 1e-2 = 1e11 B/s = 100 GB/s.
  CHECK(to_GBps(GB(1) / milliseconds(10)) == doctest::Approx(100.0).epsilon(1e-15));
  // FLOPs: 989 TFLOP/s (H100 dense BF16) for 1.978e15 FLOP = 1.978e15 / 989e12 = 2 s.
  CHECK((flops(1.978e15) / TFLOPps(989)).raw() == doctest::Approx(2.0).epsilon(1e-15));
  CHECK(to_TFLOPps(flops(4e12) / seconds(2)) == doctest::Approx(2.0).epsilon(1e-15));  // 4e12/2/1e12
}

TEST_CASE("units: same-dimension arithmetic") {
  Bytes b = MiB(1);
  b += MiB(1);
  CHECK(b == MiB(2));                 // 2^20 + 2^20 = 2^21, exact
  b -= bytes(48576);
  CHECK(b.raw() == 2048576.0);        // 2097152 - 48576
  CHECK((GB(3) - GB(1)) == GB(2));
  CHECK((GB(3) + GB(1)) == GB(4));
  CHECK((GB(1) * 4.0) == GB(4));
  CHECK((0.5 * GB(4)) == GB(2));
  CHECK((GB(4) / 8.0) == MB(500));    // 4e9 / 8 = 5e8 = 500 MB
  CHECK(GB(1) / MB(1) == 1000.0);     // 1e9 / 1e6, exact
  CHECK(seconds(1) < seconds(2));
  CHECK(seconds(2) >= seconds(2));
  CHECK(Bytes{} == bytes(0));
}

TEST_CASE("sim_time: to_sim_time rounds to the nearest picosecond") {
  using sim::to_sim_time;
  CHECK(sim::kPicosecondsPerSecond == 1'000'000'000'000);
  CHECK(to_sim_time(seconds(1)) == 1'000'000'000'000);
  CHECK(to_sim_time(microseconds(1)) == 1'000'000);      // 1e-6 * 1e12
  CHECK(to_sim_time(milliseconds(1.5)) == 1'500'000'000);  // 1.5e-3 * 1e12
  CHECK(to_sim_time(hours(1)) == 3'600'000'000'000'000);  // 3600 * 1e12, within int64
  CHECK(to_sim_time(seconds(0)) == 0);
  // 1 GiB at 100 Gbit/s = 0.08589934592 s = 85'899'345'920 ps (see above).
  CHECK(to_sim_time(GiB(1) / Gbitps(100)) == 85'899'345'920);
  // Nearest, not truncation: 23 * 1e-12 * 1e12 evaluates to 22.999999999999996 in double, which
  // truncation would turn into 22.
  CHECK(to_sim_time(seconds(23 * 1e-12)) == 23);
  // Sub-picosecond parts round to the nearest: 2.4 -> 2, 2.6 -> 3, 0.4 -> 0, -2.6 -> -3.
  CHECK(to_sim_time(seconds(2.4e-12)) == 2);
  CHECK(to_sim_time(seconds(2.6e-12)) == 3);
  CHECK(to_sim_time(seconds(0.4e-12)) == 0);
  CHECK(to_sim_time(seconds(-2.6e-12)) == -3);
  // 1.234567 us = 1'234'567 ps.
  CHECK(to_sim_time(microseconds(1.234567)) == 1'234'567);
}

TEST_CASE("sim_time: to_seconds and the k ps round trip (property)") {
  using sim::SimTime;
  using sim::to_seconds;
  using sim::to_sim_time;
  CHECK(to_seconds(1'000'000).raw() == doctest::Approx(1e-6).epsilon(1e-15));
  CHECK(to_seconds(0).raw() == 0.0);
  // Every whole number k of picoseconds below 1e5 survives k * 1e-12 -> Seconds -> SimTime.
  for (SimTime k = 0; k < 100'000; ++k) {
    const SimTime back = to_sim_time(seconds(static_cast<double>(k) * 1e-12));
    if (back != k) {
      CHECK(back == k);  // report only failures: 1e5 checks would flood the log
      break;
    }
  }
  // Random k up to 1e14 ps (100 s): to_seconds then to_sim_time returns k. Two roundings of
  // relative size 2^-53 each give an absolute error below 1e14 * 2.3e-16 = 0.023 ps < 0.5 ps.
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<SimTime> dist(0, 100'000'000'000'000);
  int failures = 0;
  for (int i = 0; i < 100'000; ++i) {
    const SimTime k = dist(rng);
    if (to_sim_time(to_seconds(k)) != k) ++failures;
  }
  CHECK(failures == 0);
}

}  // namespace
}  // namespace clustersim
