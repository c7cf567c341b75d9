// Strong unit types for the whole simulator.
//
// A Quantity carries a value and a unit tag; only physically meaningful arithmetic compiles:
//   Bytes / BytesPerSecond -> Seconds,  Flops / FlopsPerSecond -> Seconds,
//   BytesPerSecond * Seconds -> Bytes,  Quantity * double -> Quantity,  Quantity / Quantity -> double.
// Base units are SI: seconds, bytes, bytes per second, floating-point operations (FLOP) and FLOP/s.
// Decimal and binary prefixes are spelled out by named constructors (GBps = 1e9 B/s, Gbitps = 1e9/8 B/s,
// GiB = 2^30 B, MiB = 2^20 B), because mixing them up is the classic failure of simulator inputs:
// NVIDIA quotes NVLink bandwidth in decimal GB/s, NICs in Gbit/s, and memory in binary GiB.
#pragma once

#include <compare>
#include <cstdint>

namespace clustersim {

template <class Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  static constexpr Quantity from_raw(double v) { return Quantity(v); }
  constexpr double raw() const { return v_; }

  friend constexpr Quantity operator+(Quantity a, Quantity b) { return Quantity(a.v_ + b.v_); }
  friend constexpr Quantity operator-(Quantity a, Quantity b) { return Quantity(a.v_ - b.v_); }
  friend constexpr Quantity operator*(Quantity a, double k) { return Quantity(a.v_ * k); }
  friend constexpr Quantity operator*(double k, Quantity a) { return Quantity(a.v_ * k); }
  friend constexpr Quantity operator/(Quantity a, double k) { return Quantity(a.v_ / k); }
  friend constexpr double operator/(Quantity a, Quantity b) { return a.v_ / b.v_; }
  constexpr Quantity& operator+=(Quantity b) { v_ += b.v_; return *this; }
  constexpr Quantity& operator-=(Quantity b) { v_ -= b.v_; return *this; }
  friend constexpr auto operator<=>(Quantity, Quantity) = default;

 private:
  constexpr explicit Quantity(double v) : v_(v) {}
  double v_{};
};

using Seconds = Quantity<struct SecondsTag>;
using Bytes = Quantity<struct BytesTag>;
using BytesPerSecond = Quantity<struct BytesPerSecondTag>;
using Flops = Quantity<struct FlopsTag>;                  // a count of floating-point operations
using FlopsPerSecond = Quantity<struct FlopsPerSecondTag>;

constexpr Seconds operator/(Bytes b, BytesPerSecond r) { return Seconds::from_raw(b.raw() / r.raw()); }
constexpr Seconds operator/(Flops f, FlopsPerSecond r) { return Seconds::from_raw(f.raw() / r.raw()); }
constexpr Bytes operator*(BytesPerSecond r, Seconds t) { return Bytes::from_raw(r.raw() * t.raw()); }
constexpr Bytes operator*(Seconds t, BytesPerSecond r) { return r * t; }
constexpr BytesPerSecond operator/(Bytes b, Seconds t) { return BytesPerSecond::from_raw(b.raw() / t.raw()); }
constexpr FlopsPerSecond operator/(Flops f, Seconds t) { return FlopsPerSecond::from_raw(f.raw() / t.raw()); }

// Named constructors: the prefix and the base (bit or byte, decimal or binary) are in the name.
constexpr Seconds seconds(double v) { return Seconds::from_raw(v); }
constexpr Seconds milliseconds(double v) { return Seconds::from_raw(v * 1e-3); }
constexpr Seconds microseconds(double v) { return Seconds::from_raw(v * 1e-6); }
constexpr Seconds hours(double v) { return Seconds::from_raw(v * 3600.0); }
constexpr Bytes bytes(double v) { return Bytes::from_raw(v); }
constexpr Bytes MB(double v) { return Bytes::from_raw(v * 1e6); }                 // decimal megabytes
constexpr Bytes GB(double v) { return Bytes::from_raw(v * 1e9); }                 // decimal gigabytes
constexpr Bytes MiB(double v) { return Bytes::from_raw(v * 1048576.0); }          // binary, 2^20
constexpr Bytes GiB(double v) { return Bytes::from_raw(v * 1073741824.0); }       // binary, 2^30
constexpr BytesPerSecond bytes_per_second(double v) { return BytesPerSecond::from_raw(v); }
constexpr BytesPerSecond GBps(double v) { return BytesPerSecond::from_raw(v * 1e9); }      // decimal GB/s
constexpr BytesPerSecond Gbitps(double v) { return BytesPerSecond::from_raw(v * 1e9 / 8); }  // Gbit/s
constexpr Flops flops(double v) { return Flops::from_raw(v); }
constexpr FlopsPerSecond TFLOPps(double v) { return FlopsPerSecond::from_raw(v * 1e12); }  // 1e12 FLOP/s

constexpr double to_us(Seconds s) { return s.raw() * 1e6; }
constexpr double to_GBps(BytesPerSecond r) { return r.raw() / 1e9; }
constexpr double to_GiB(Bytes b) { return b.raw() / 1073741824.0; }
constexpr double to_TFLOPps(FlopsPerSecond r) { return r.raw() / 1e12; }

}  // namespace clustersim
