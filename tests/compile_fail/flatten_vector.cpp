// expect: this type cannot be flattened
// Flattening a std::vector (not a fixed-size tree).
#include <cugraphs/flatten.hpp>

#include <vector>

constexpr auto n = cugraphs::leaf_count_v<std::tuple<cugraphs::DeviceSpan<float>, std::vector<float>>>;
