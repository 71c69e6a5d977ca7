#include "harness/study/formats_quantizer.hpp"

#include <algorithm>
#include <stdexcept>

#include "harness/requests/quantize_request.hpp"

namespace fp8lab {

Granularity FormatsQuantizer::granularity_for(std::string_view role) const {
  return Granularity::parse(role == "weight" ? weight_granularity : granularity);
}

FormatsQuantizer parse_formats_quantizer(std::string_view text) {
  FormatsQuantizer q;
  q.text = std::string(text);
  const std::size_t first = text.find('/');
  try {
    if (first == std::string_view::npos) {
      const QuantizeScheme& s = find_scheme(text);
      q.scheme = s.name;
      q.format = parse_element_format(s.format);
      q.granularity = s.granularity;
      q.weight_granularity = s.weight_granularity;
      q.rule = parse_scale_rule(s.scale);
    } else {
      const std::size_t second = text.find('/', first + 1);
      if (second == std::string_view::npos || text.find('/', second + 1) != std::string_view::npos)
        throw std::invalid_argument("is neither a scheme (" + scheme_names() + ") nor FORMAT/GRANULARITY/RULE");
      q.format = parse_element_format(text.substr(0, first));
      q.granularity = std::string(text.substr(first + 1, second - first - 1));
      Granularity::parse(q.granularity);
      q.weight_granularity = q.granularity;
      q.rule = parse_scale_rule(text.substr(second + 1));
    }
    check_rule_serves_format(q.rule, q.format);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("quantizer '" + std::string(text) + "': " + e.what());
  }
  return q;
}

std::vector<ScaleRule> all_scale_rules() {
  std::vector<ScaleRule> rules;
  const std::string names = scale_rule_names();
  for (std::size_t start = 0; start <= names.size();) {
    const std::size_t end = std::min(names.find(", ", start), names.size());
    rules.push_back(parse_scale_rule(std::string_view(names).substr(start, end - start)));
    start = end + 2;
  }
  return rules;
}

}  // namespace fp8lab
