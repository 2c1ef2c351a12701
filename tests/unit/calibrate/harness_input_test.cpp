// The harness's command line, plan file and launcher environment (calibrate/harness/options.cpp,
// plan_file.cpp, launch_env.cpp): plain
// C++, compiled here so that they are tested on machines without CUDA. Every value is checked
// whole and in range: nothing wraps, nothing is read past its end, no special file is read.
#include <gtest/gtest.h>

#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "calibrate/harness/launch_env.hpp"
#include "calibrate/harness/options.hpp"
#include "calibrate/harness/plan_file.hpp"
#include "calibrate/harness/results.hpp"
#include "calibrate/harness/util.hpp"
#include "tests/unit/scratch_folder.hpp"

namespace fsdpsim::harness {
namespace {

namespace fs = std::filesystem;

Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fsdpsim-calibrate");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

// The UsageError `call` throws, or `otherwise` when it throws none.
template <typename Call>
std::string usage_error_of(Call call, const std::string& otherwise = "") {
  try {
    call();
  } catch (const UsageError& e) {
    return e.what();
  }
  return otherwise;
}

std::string usage_error(const std::vector<std::string>& args) {
  try {
    (void)parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// The launcher variables of a test, set for its scope and removed after.
class LaunchVariables {
 public:
  LaunchVariables(std::initializer_list<std::pair<const char*, const char*>> variables) {
    for (const char* name : kAll) ::unsetenv(name);
    for (const auto& [name, value] : variables) ::setenv(name, value, 1);
  }
  ~LaunchVariables() {
    for (const char* name : kAll) ::unsetenv(name);
  }
  LaunchVariables(const LaunchVariables&) = delete;
  LaunchVariables& operator=(const LaunchVariables&) = delete;

 private:
  static constexpr const char* kAll[] = {"RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_RANK",
                                         "OMPI_COMM_WORLD_RANK",
                                         "OMPI_COMM_WORLD_SIZE",
                                         "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "SLURM_PROCID",
                                         "SLURM_NTASKS",
                                         "SLURM_LOCALID",
                                         "SLURM_JOB_ID",
                                         "SLURM_STEP_ID",
                                         "TORCHELASTIC_RUN_ID",
                                         "PMIX_NAMESPACE",
                                         "MASTER_PORT"};
};

// mpirun inside an sbatch script: every process inherits the batch step's SLURM_PROCID=0 and
// SLURM_NTASKS; Open MPI's own variables say which rank each is. torchrun's say it for its
// workers whatever launched torchrun.
TEST(HarnessInput, TheLauncherThatStartedTheProcessNamesItsRank) {
  {
    const LaunchVariables v{{"SLURM_PROCID", "0"},          {"SLURM_NTASKS", "16"},
                            {"SLURM_LOCALID", "0"},         {"OMPI_COMM_WORLD_RANK", "3"},
                            {"OMPI_COMM_WORLD_SIZE", "16"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}};
    const LaunchEnv e = launch_env();
    EXPECT_EQ(e.launcher, "mpirun (Open MPI)");
    EXPECT_EQ(e.rank, 3);
    EXPECT_EQ(e.local_rank, 3);
  }
  {
    const LaunchVariables v{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
                            {"RANK", "9"},         {"WORLD_SIZE", "16"},  {"LOCAL_RANK", "1"}};
    const LaunchEnv e = launch_env();
    EXPECT_EQ(e.launcher, "torchrun");
    EXPECT_EQ(e.rank, 9);
    EXPECT_EQ(e.world, 16);
  }
  {
    const LaunchVariables v{{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "5"}};
    const LaunchEnv e = launch_env();
    EXPECT_EQ(e.launcher, "slurm");
    EXPECT_EQ(e.rank, 5);
  }
  {
    const LaunchVariables v{};
    EXPECT_TRUE(launch_env().launcher.empty());
  }
  {
    const LaunchVariables v{{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}};
    EXPECT_THROW((void)launch_env(), UsageError);
  }
  {
    const LaunchVariables v{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}};
    try {
      (void)launch_env();
      ADD_FAILURE() << "no local rank accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("SLURM_LOCALID is not set"), std::string::npos);
    }
  }
}

// Half a launcher's variables, or a number with junk after it, is refused, not read as a
// single-process run or as the number's start.
TEST(HarnessInput, ALauncherIsReadWholeOrRefused) {
  const auto error_of = [] { return usage_error_of([] { (void)launch_env(); }, "accepted"); };
  {
    const LaunchVariables v{{"RANK", "0"}, {"LOCAL_RANK", "0"}};
    EXPECT_EQ(error_of(),
              "RANK is set without WORLD_SIZE (torchrun's variables); unset it, or launch every "
              "rank with both");
  }
  {
    const LaunchVariables v{{"RANK", "0"}, {"WORLD_SIZE", "8abc"}, {"LOCAL_RANK", "0"}};
    EXPECT_NE(error_of().find("WORLD_SIZE=8abc"), std::string::npos) << error_of();
  }
}

// The NCCL id file's tag is the same in every process of one job: under mpirun inside an sbatch
// script Slurm's step id is not (the batch step on the first node, mpirun's daemons' step on the
// others), so Open MPI's PMIx namespace names it, or the user does.
TEST(HarnessInput, TheRendezvousTagIsTheJobsWhateverTheNode) {
  const auto tag = [](const std::string& given = "") {
    try {
      return rendezvous_tag(launch_env(), given);
    } catch (const UsageError& e) {
      return std::string("error: ") + e.what();
    }
  };
  {
    const LaunchVariables v{{"OMPI_COMM_WORLD_RANK", "3"},
                            {"OMPI_COMM_WORLD_SIZE", "16"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                            {"SLURM_JOB_ID", "42"},
                            {"SLURM_STEP_ID", "0"},
                            {"PMIX_NAMESPACE", "prterun-n01-77/1"}};
    EXPECT_EQ(tag(), "ompi-prterun-n01-77_1");
    EXPECT_EQ(tag("run7"), "run7");
  }
  {
    const LaunchVariables v{{"OMPI_COMM_WORLD_RANK", "3"},
                            {"OMPI_COMM_WORLD_SIZE", "16"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                            {"SLURM_JOB_ID", "42"}};
    EXPECT_EQ(tag().rfind("error: under mpirun, pass --rendezvous-tag", 0), 0U) << tag();
  }
  {
    const LaunchVariables v{{"RANK", "1"},
                            {"WORLD_SIZE", "2"},
                            {"LOCAL_RANK", "1"},
                            {"TORCHELASTIC_RUN_ID", "job9"},
                            {"SLURM_JOB_ID", "42"}};
    EXPECT_EQ(tag(), "torchrun-job9");
  }
  {
    const LaunchVariables v{{"SLURM_PROCID", "1"},
                            {"SLURM_NTASKS", "2"},
                            {"SLURM_LOCALID", "1"},
                            {"SLURM_JOB_ID", "42"},
                            {"SLURM_STEP_ID", "3"}};
    EXPECT_EQ(tag(), "slurm-42.3");
  }
  {
    const LaunchVariables v{
        {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_PORT", "29500"}};
    EXPECT_EQ(tag(), "port-29500");
  }
  {
    const LaunchVariables v{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}};
    EXPECT_EQ(tag().rfind("error: one process per GPU needs a tag", 0), 0U) << tag();
  }
}

// -o is checked before any measurement (and NCCL's start on every node): a folder that does not
// exist, or a folder named as the file, is a usage error; a good path is left as it was.
TEST(HarnessInput, AnOutputThatCannotBeWrittenIsRefusedFirst) {
  const fs::path dir = fsdpsim::test_support::temp_dir("harness_output");
  const auto error_of = [](const std::string& path) {
    return usage_error_of([&] { check_writable(path); });
  };
  const std::string missing = (dir / "no_such_folder" / "p.json").string();
  EXPECT_NE(error_of(missing).find("-o " + missing + ": cannot write "), std::string::npos)
      << error_of(missing);
  EXPECT_EQ(error_of(dir.string()),
            "-o " + dir.string() + ": is a folder; name the profile file to write");
  EXPECT_EQ(error_of((dir / "p.json").string()), "");
  EXPECT_TRUE(fs::is_empty(dir));  // nothing left behind
  // The --plan file, however spelled or linked, is refused as -o: the first save would replace
  // it. Another file, or no plan, passes.
  const fs::path plan = dir / "plan.txt";
  std::ofstream(plan) << "gemm bf16 8 8 8 1 1\n";
  fs::create_symlink(plan, dir / "link.txt");
  const auto plan_error = [&](const std::string& output) {
    return usage_error_of([&] { check_output_is_not_the_plan(output, plan.string()); });
  };
  EXPECT_EQ(plan_error(plan.string()), "-o " + plan.string() + ": is the --plan file " +
                                           plan.string() + "; the profile would replace the plan");
  EXPECT_NE(plan_error((dir / "." / "plan.txt").string()), "");
  EXPECT_NE(plan_error((dir / "link.txt").string()), "");
  EXPECT_EQ(plan_error((dir / "p.json").string()), "");
  EXPECT_NO_THROW(check_output_is_not_the_plan(plan.string(), ""));
  fs::remove_all(dir);
}

// A profile that cannot be written whole leaves the last one in place, and says which step
// failed.
TEST(HarnessInput, AProfileIsReplacedWholeOrNotAtAll) {
  const fs::path dir = fsdpsim::test_support::temp_dir("harness_write");
  const fs::path profile = dir / "p.json";
  write_atomically(profile.string(), "first");
  write_atomically(profile.string(), "second");
  std::ifstream in(profile);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "second");
  const std::string missing = (dir / "gone" / "p.json").string();
  try {
    write_atomically(missing, "x");
    ADD_FAILURE() << "wrote into a folder that does not exist";
  } catch (const HarnessError& e) {
    EXPECT_NE(std::string(e.what()).find("(open: No such file or directory); the profile at " +
                                         missing + " is left as it was"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(std::vector<fs::path>(fs::directory_iterator(dir), fs::directory_iterator()),
            std::vector<fs::path>{profile});  // no temporary left
  fs::remove_all(dir);
}

TEST(HarnessInput, SizesAreWholeAndAtMostOnePebibyte) {
  EXPECT_EQ(parse_size("64M", "--max-bytes"), std::int64_t{64} << 20);
  EXPECT_EQ(parse_size("1048576", "--max-bytes"), std::int64_t{1} << 20);
  EXPECT_EQ(parse_size("1048576G", "--max-bytes"), kMaxBytes);
  for (const char* bad : {"99999999999999999999", "17179869185G", "1048577G", "0", "1.5G", "G"}) {
    EXPECT_THROW((void)parse_size(bad, "--max-bytes"), UsageError) << bad;
  }
  EXPECT_EQ(whole_integer("12", 1, 100), 12);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "5abc", "101", "0"}) {
    EXPECT_FALSE(whole_integer(bad, 1, 100).has_value()) << bad;
  }
}

TEST(HarnessInput, OptionsAreNeverWrapped) {
  EXPECT_EQ(parse({"--repeats", "20"}).repeats, 20);
  EXPECT_NE(usage_error({"--repeats", "4294967297"}).find("--repeats: expected a whole number"),
            std::string::npos);
  EXPECT_NE(usage_error({"--warmup", "2147483648"}).find("--warmup"), std::string::npos);
  EXPECT_NE(usage_error({"--shard-groups", "4294967304"}).find("--shard-groups"),
            std::string::npos);
  EXPECT_NE(usage_error({"--timeout", "5abc"}).find("--timeout: expected seconds > 0"),
            std::string::npos);
  // Past a day the NCCL id's age limit would overflow the clock's nanoseconds.
  EXPECT_EQ(parse({"--timeout", "86400"}).timeout_s, 86400.0);
  EXPECT_NE(usage_error({"--timeout", "1e10"})
                .find("--timeout: expected seconds > 0 and at most 86400, found '1e10'"),
            std::string::npos);
  EXPECT_NE(usage_error({"--gemm-grid", ""}).find("--gemm-grid: expected dimensions or none"),
            std::string::npos);
  EXPECT_NE(usage_error({"--min-bytes", "99999999999999999999"}).find("--min-bytes"),
            std::string::npos);
  // An empty size in the list is a typo, not a size to skip.
  for (const char* sizes : {"8,,16", ",", "", "8,"}) {
    EXPECT_EQ(
        usage_error({"--shard-groups", sizes}),
        std::string("--shard-groups: expected group sizes such as 8,16, found '") + sizes + "'");
  }
}

// Every phase is on by default, rank speeds included, and --phases picks some.
TEST(HarnessInput, PhasesAreChosenByName) {
  const Options all = parse({});
  for (const char* phase :
       {"collectives", "concurrent", "gemm", "gemm-under-nccl", "rank-speed", "memory"}) {
    EXPECT_TRUE(has_phase(all, phase)) << phase;
  }
  const Options speed = parse({"--phases", "rank-speed"});
  EXPECT_TRUE(has_phase(speed, "rank-speed"));
  EXPECT_FALSE(has_phase(speed, "gemm"));
  EXPECT_NE(usage_error({"--phases", "rank_speed"}).find("--phases"), std::string::npos);
  EXPECT_NE(help_text().find("rank-speed       every rank times kernel launches"),
            std::string::npos);
}

// The profile's name is text on one line (fsdpsim refuses a profile whose name is not, which
// would surface only after the whole measurement); quoted values never reach the terminal raw.
TEST(HarnessInput, NamesAndQuotedValuesAreText) {
  EXPECT_EQ(parse({"--name", "h200 x8 (run 2)"}).name, "h200 x8 (run 2)");
  EXPECT_EQ(usage_error({"--name",
                         "my\x1b"
                         "[2Jcluster"}),
            "--name: expected a name of text on one line, found 'my<U+001B>[2Jcluster'");
  EXPECT_NE(usage_error({"--name", "caf\xe9"}).find("found 'caf<0xE9>'"), std::string::npos);
  EXPECT_NE(usage_error({"--name", ""}).find("--name: expected a name"), std::string::npos);
  EXPECT_EQ(printable("a\tb\x07"
                      "c\xc2\x9b"
                      "d\xc3\xa9"),
            "a\tb<U+0007>c<U+009B>d\xc3\xa9");
  EXPECT_EQ(printable("\xed\xa0\x80"), "<0xED><0xA0><0x80>");  // a UTF-16 surrogate
}

TEST(HarnessInput, PlanLinesAreCheckedWhole) {
  const fs::path dir = fsdpsim::test_support::temp_dir("harness_plan");
  const auto plan_with = [&dir](const std::string& text) {
    const fs::path p = dir / "plan.txt";
    std::ofstream(p) << text;
    return p.string();
  };
  const Plan plan = read_plan(
      plan_with("# from fsdpsim calibrate plan\nshard_group 8\ngemm bf16 4096 4096 4096 1 12\n"
                "collective all_gather 16 8 1048576 24\n"));
  EXPECT_EQ(plan.shard_groups, (std::vector<std::int32_t>{8}));
  ASSERT_EQ(plan.gemms.size(), 1U);
  EXPECT_EQ(plan.gemms[0].k, 4096);
  ASSERT_EQ(plan.collectives.size(), 1U);
  EXPECT_EQ(plan.collectives[0].ranks_per_node, 8);
  for (const char* bad : {"gemm int8 1 1 1 1 1", "collective alltoall 8 8 100 1",
                          "collective all_gather -5 0 100 1", "collective all_gather 16 5 100 1",
                          "shard_group 8 trailing junk", "gemm bf16 4611686018427387904 1 1 1 1",
                          "collective all_gather 8 8 9223372036854775807 1", "gemm bf16 1 1 1 1"}) {
    EXPECT_THROW((void)read_plan(plan_with(std::string(bad) + "\n")), UsageError) << bad;
  }
  EXPECT_THROW((void)read_plan("/dev/zero"), UsageError);
  EXPECT_THROW((void)read_plan(dir.string()), UsageError);
  const std::string nowhere = (dir / "nowhere.txt").string();
  EXPECT_EQ(usage_error_of([&] { (void)read_plan(nowhere); }, "accepted"),
            "--plan: " + nowhere +
                " does not exist (fsdpsim calibrate plan SCENARIO -o PATH writes one)");
  // Each fault is named.
  const auto error_of = [&](const std::string& text) {
    return usage_error_of([&] { (void)read_plan(plan_with(text)); }, "accepted");
  };
  EXPECT_NE(error_of("gemm int8 1 1 1 1 1\n").find(":1: DTYPE is 'int8', expected bf16"),
            std::string::npos);
  EXPECT_NE(error_of("collective all_gather 16 5 100 1\n")
                .find(":1: RANKS_PER_NODE 5 does not divide RANKS 16"),
            std::string::npos);
  EXPECT_NE(error_of("gemm bf16 1 1 1 1\n").find(":1: 'gemm' takes 6 fields, found 5"),
            std::string::npos);
  EXPECT_NE(error_of("gemm bf16 8 -1 8 1 1\n").find(":1: N is '-1', expected a whole number"),
            std::string::npos);
  // Control characters and bytes that are not UTF-8 are named at their line and column (a NUL
  // cut the message that quoted its line short).
  EXPECT_NE(error_of("shard_group 8\ngemm bf16 8 8\x1b"
                     "[2J 8 1 1\n")
                .find(":2:14: expected text, found U+001B"),
            std::string::npos);
  EXPECT_NE(error_of(std::string("gemm bf16 8 8 8 1 1\0\n", 21))
                .find(":1:20: expected text, found U+0000"),
            std::string::npos);
  EXPECT_NE(error_of("gemm bf16 8 8 8 1 1 # caf\xe9\n").find(":1:26: expected text, found 0xE9"),
            std::string::npos);
  EXPECT_EQ(error_of("gemm bf16 8 8 8 1 1\r\n"), "accepted");  // CRLF
  // Every dimension in range, yet an operand past 2^40 elements: counting it would overflow.
  EXPECT_NE(error_of("gemm bf16 16777216 16777216 4096 16777216 1\n")
                .find(":1: an operand of 16777216 x 16777216 x 4096 x 16777216 holds more than "
                      "2^40 elements"),
            std::string::npos);
  EXPECT_EQ(error_of("gemm bf16 65536 8 1048576 16 1\n"), "accepted");  // 2^40 exactly
  // The header fsdpsim writes names the format's version: another one is not read as v1.
  EXPECT_EQ(error_of("# fsdpsim calibration plan v1: scenario x (x.json)\ngemm bf16 8 8 8 1 1\n"),
            "accepted");
  EXPECT_NE(error_of("# fsdpsim calibration plan v2: scenario x (x.json)\ngemm bf16 8 8 8 1 1\n")
                .find(":1: a plan of another format version ('# fsdpsim calibration plan v2')"),
            std::string::npos);
  // A plan with nothing to measure is refused; repeated shapes (merged plans) are measured once.
  EXPECT_EQ(error_of("# groups only\nshard_group 8\n"), "accepted");
  EXPECT_NE(error_of("# nothing\n").find("lists nothing"), std::string::npos);
  EXPECT_NE(error_of("").find("lists nothing"), std::string::npos);
  const Plan merged =
      read_plan(plan_with("gemm bf16 8 8 8 1 3\ngemm bf16 8 8 8 1 5\ngemm fp32 8 8 8 1 1\n"
                          "collective all_gather 8 8 64 1\ncollective all_gather 8 8 64 2\n"
                          "shard_group 8\nshard_group 8\n"));
  EXPECT_EQ(merged.gemms.size(), 2U);
  EXPECT_EQ(merged.collectives.size(), 1U);
  EXPECT_EQ(merged.shard_groups, (std::vector<std::int32_t>{8}));
  fs::remove_all(dir);
}

// A plan for 4 nodes run on one: the layouts no group measures are named, once each.
TEST(HarnessInput, PlannedLayoutsNoGroupMeasuresAreNamed) {
  Plan plan;
  plan.collectives = {{"all_gather", 32, 8, 1 << 20},
                      {"reduce_scatter", 32, 8, 1 << 20},
                      {"all_reduce", 4, 1, 1 << 10},
                      {"all_gather", 8, 8, 1 << 20}};
  const std::vector<GroupLayout> one_node = {{8, 8}, {1, 1}};
  EXPECT_EQ(unmeasured_plan_layouts(plan, one_node),
            "the plan's collectives over 4 ranks (1 per node), 32 ranks (8 per node) match no "
            "group this job measures: their curves are not in this profile; run the harness on "
            "the scenario's node layout (or add --shard-groups) to price them");
  EXPECT_EQ(unmeasured_plan_layouts(plan, {{32, 8}, {8, 8}, {4, 1}}), "");
}

}  // namespace
}  // namespace fsdpsim::harness
