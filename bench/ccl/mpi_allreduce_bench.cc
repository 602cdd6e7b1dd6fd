// mpi-allreduce-bench: Open MPI's MPI_Allreduce (f32, sum) as a peer of
// `giant bench ccl`'s allreduce. It runs under mpirun (one process per rank)
// and prints the same table rows and key=value lines as the other ccl
// benchmarks (bench=mpi), so bench/ccl/compare.sh parses them all alike.
//
//   mpirun --allow-run-as-root -np 2 --mca pml ob1 --mca btl self,vader
//          build/bench/ccl/mpi-allreduce-bench --bytes 64MiB --iters 5 --warmup 2
//
// The row names the transport Open MPI was told to use (its pml, btl and the
// vader single-copy mechanism, read back through MPI_T), since mpirun's --mca
// flags, not this program, decide it.

#include <mpi.h>

#include <string>
#include <vector>

#include "bench_common.h"

namespace giant::bench {
namespace {

constexpr const char* kUsage =
    "usage: mpirun -np N [MPI FLAGS] mpi-allreduce-bench [--bytes SIZE | --min-bytes SIZE --max-bytes SIZE\n"
    "                    [--step-factor F]] [--iters 5] [--warmup 2] [--repeat 1]\n"
    "MPI_Allreduce of f32, sum, out of place; every result is checked.\n";

struct Options {
  int64_t min_bytes = int64_t{64} << 20;
  int64_t max_bytes = int64_t{64} << 20;
  int step_factor = 2;
  int iters = 5;
  int warmup = 2;
  int repeat = 1;
  bool help = false;
};

Options parse_options(int argc, char** argv) {
  Options options;
  FlagReader flags(argc, argv);
  while (flags.next()) {
    const std::string& flag = flags.flag();
    if (flag == "--help" || flag == "-h") {
      options.help = true;
    } else if (flag == "--bytes") {
      options.min_bytes = options.max_bytes = parse_size(flags.value());
    } else if (flag == "--min-bytes") {
      options.min_bytes = parse_size(flags.value());
    } else if (flag == "--max-bytes") {
      options.max_bytes = parse_size(flags.value());
    } else if (flag == "--step-factor") {
      options.step_factor = parse_int(flags.value(), flag, 2);
    } else if (flag == "--iters") {
      options.iters = parse_int(flags.value(), flag, 1);
    } else if (flag == "--warmup") {
      options.warmup = parse_int(flags.value(), flag, 0);
    } else if (flag == "--repeat") {
      options.repeat = parse_int(flags.value(), flag, 1);
    } else {
      throw std::invalid_argument("unknown flag " + flag + "\n" + kUsage);
    }
  }
  if (options.min_bytes < 4 || options.max_bytes < options.min_bytes)
    throw std::invalid_argument("need 4 <= --min-bytes <= --max-bytes");
  return options;
}

// The value of an Open MPI control variable (an MCA parameter) by name, enum
// values by their name; "?" when the MPI library cannot say.
std::string control_variable(const std::string& name) {
  int index = 0;
  if (MPI_T_cvar_get_index(name.c_str(), &index) != MPI_SUCCESS) return "?";
  char cvar_name[256], description[1024];
  int name_len = sizeof cvar_name, desc_len = sizeof description, verbosity = 0, bind = 0, scope = 0;
  MPI_Datatype datatype;
  MPI_T_enum enumtype;
  if (MPI_T_cvar_get_info(index, cvar_name, &name_len, &verbosity, &datatype, &enumtype, description, &desc_len,
                          &bind, &scope) != MPI_SUCCESS)
    return "?";
  MPI_T_cvar_handle handle;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) return "?";
  std::string value = "?";
  if (datatype == MPI_CHAR) {
    std::vector<char> text(static_cast<size_t>(count) + 1, '\0');
    if (MPI_T_cvar_read(handle, text.data()) == MPI_SUCCESS) value = text.data();
    if (value.empty()) value = "default";
  } else if (datatype == MPI_INT) {
    int number = 0;
    if (MPI_T_cvar_read(handle, &number) == MPI_SUCCESS) {
      value = std::to_string(number);
      int items = 0;
      if (enumtype != MPI_T_ENUM_NULL && MPI_T_enum_get_info(enumtype, &items, cvar_name, &name_len) == MPI_SUCCESS) {
        for (int i = 0; i < items; ++i) {
          int item_value = 0;
          char item_name[256];
          int item_len = sizeof item_name;
          if (MPI_T_enum_get_item(enumtype, i, &item_value, item_name, &item_len) == MPI_SUCCESS &&
              item_value == number)
            value = item_name;
        }
      }
    }
  }
  MPI_T_cvar_handle_free(&handle);
  return value;
}

// Small integers, so the sum is exact in float in any order (tolerance 0),
// the same inputs as gloo-allreduce-bench.
float input_value(int rank, size_t index) {
  return static_cast<float>((index * 7 + static_cast<size_t>(rank) * 5) % 8);
}

struct TransportInfo {
  std::string transport;  // "shm" or "tcp" or the btl list
  std::vector<std::pair<std::string, std::string>> extra;
};

TransportInfo describe_transport() {
  TransportInfo info;
  const std::string pml = control_variable("pml");
  const std::string btl = control_variable("btl");
  const std::string single_copy = control_variable("btl_vader_single_copy_mechanism");
  const bool vader_only = btl == "self,vader" || btl == "vader,self";
  info.transport = vader_only ? "shm" : btl == "self,tcp" || btl == "tcp,self" ? "tcp" : btl;
  std::string all = vader_only ? "shm(vader," + single_copy + ")" : info.transport;
  info.extra = {{"mpi_pml", pml}, {"mpi_btl", btl}, {"single_copy", single_copy}, {"transports", "all:" + all}};
  return info;
}

int64_t run_size(const Options& options, const TransportInfo& transport, int64_t bytes) {
  int rank = 0, nproc = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nproc);
  const size_t count = static_cast<size_t>(bytes) / sizeof(float);
  std::vector<float> input(count), output(count, -1.0f);
  for (size_t i = 0; i < count; ++i) input[i] = input_value(rank, i);
  auto once = [&] {
    MPI_Allreduce(input.data(), output.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  };
  for (int i = 0; i < options.warmup; ++i) once();
  std::vector<double> times_us;
  for (int rep = 0; rep < options.repeat; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < options.iters; ++i) once();
    double mean = (MPI_Wtime() - start) / options.iters, slowest = 0;
    MPI_Allreduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times_us.push_back(slowest * 1e6);
  }
  // Every iteration writes the same result, so the last one is checked.
  long long wrong = 0, total_wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < nproc; ++r) expected += input_value(r, i);
    wrong += output[i] != expected;
  }
  MPI_Allreduce(&wrong, &total_wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (wrong > 0) std::fprintf(stderr, "[rank %d] %lld wrong elements at %lld bytes\n", rank, wrong,
                              static_cast<long long>(bytes));
  if (rank == 0) {
    Measurement m;
    m.bench = "mpi";
    m.collective = "allreduce";
    m.nproc = nproc;
    m.bytes = static_cast<int64_t>(count * sizeof(float));
    m.count = static_cast<int64_t>(count);
    m.dtype = "f32";
    m.op = "sum";
    m.algorithm = "mpi_allreduce";
    m.iters = options.iters;
    m.wrong = total_wrong;
    m.transport = transport.transport;
    m.extra = transport.extra;
    for (int rep = 0; rep < options.repeat; ++rep) {
      m.rep = rep;
      m.time_us = times_us[rep];
      print_measurement(m);
    }
  }
  return total_wrong;
}

int main_impl(int argc, char** argv) {
  const Options options = parse_options(argc, argv);  // before MPI_Init: bad flags fail fast
  if (options.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  MPI_Init(&argc, &argv);
  int provided = 0;
  MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
  int rank = 0, nproc = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nproc);
  const TransportInfo transport = describe_transport();
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int version_len = 0;
    MPI_Get_library_version(version, &version_len);
    std::string first_line(version, static_cast<size_t>(version_len));
    first_line = first_line.substr(0, first_line.find_first_of("\n,"));
    std::printf("# mpi-allreduce-bench nproc=%d bytes=%lld..%lld step_factor=%d iters=%d warmup=%d repeat=%d "
                "library=\"%s\"\n",
                nproc, static_cast<long long>(options.min_bytes), static_cast<long long>(options.max_bytes),
                options.step_factor, options.iters, options.warmup, options.repeat, first_line.c_str());
    std::printf("# transport:");
    for (const auto& [key, value] : transport.extra) std::printf(" %s=%s", key.c_str(), value.c_str());
    std::printf("\n");
    print_table_header("allreduce (MPI_Allreduce, f32 sum)");
  }
  int64_t wrong = 0;
  for (int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= options.step_factor)
    wrong += run_size(options, transport, bytes);
  MPI_T_finalize();
  MPI_Finalize();
  return wrong == 0 ? kExitOk : kExitWrongResults;
}

}  // namespace
}  // namespace giant::bench

int main(int argc, char** argv) {
  try {
    return giant::bench::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi-allreduce-bench: %s\n", e.what());
    return 2;
  }
}
