#pragma once
// How this fp8lab was built and what it runs on, for the provenance of every results file:
// compiler and flags (with the -march actually targeted), the SIMD path chosen at run time,
// and the versions of Eigen, OpenMP and HDF5. Also the command line the process was started
// with (CF `history`).
#include <map>
#include <string>

namespace fp8lab {

// compiler, compiler_flags, build_march, cpu_isa, eigen_version, openmp_version, hdf5_version.
std::map<std::string, std::string> build_provenance();

// Recorded once by main(); the arguments joined with spaces, quoted where they need it.
void record_command_line(int argc, char** argv);
const std::string& command_line();  // "fp8lab" before record_command_line

}  // namespace fp8lab
