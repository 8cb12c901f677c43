// fmt's compiled part, built once for the whole project: with FMT_HEADER_ONLY every object
// compiled the formatting engine again (about a fifth of a typical object's compile time under
// the sanitizers). The explicit instantiations are the templates fmt/format.h declares and
// fmt/format-inl.h defines; the rest of format-inl.h is ordinary functions, defined here.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;
} // namespace detail
FMT_END_NAMESPACE
