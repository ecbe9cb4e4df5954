/*
 * profilingd-ftrace's tracefs text parser (runtime/ftrace/ft_parse.c) on
 * lines as the kernel prints them, including task names that imitate the
 * line's own fields: such a name must not move the event to another pid
 * or CPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ft_parse.h"

static struct ft_bundle bundle;

static int parse(const char *text, struct ft_line *pr)
{
	static char line[FT_LINE_MAX];
	strcpy(line, text);
	int r = ft_parse_header(line, pr);
	if (r == 0)
		r = ft_parse_event(&bundle, pr);
	return r;
}

static void test_plain(void **state)
{
	struct ft_line pr;
	bundle.n = 0;
	assert_int_equal(parse("             cc1-18439   [001] d..2.   454.578845: sched_switch: "
			       "prev_comm=cc1 prev_pid=18439 prev_prio=120 prev_state=R ==> "
			       "next_comm=memfd:sealed-91 next_pid=5884 next_prio=120", &pr), 0);
	assert_int_equal(pr.pid, 18439);
	assert_int_equal(pr.cpu, 1);
	assert_int_equal(pr.ts, 454578845000ull);
	assert_int_equal(bundle.n, 1);
	const Perfetto__Protos__SchedSwitchFtraceEvent *s = bundle.ev[0].sched_switch;
	assert_int_equal(s->prev_pid, 18439);
	assert_int_equal(s->next_pid, 5884);
	assert_string_equal(s->next_comm, "memfd:sealed-91");
	assert_int_equal(s->prev_state, 0);
}

/* A name with a '-' and digits of its own: the pid is the one after it. */
static void test_dash_in_name(void **state)
{
	struct ft_line pr;
	bundle.n = 0;
	assert_int_equal(parse(" memfd:sealed-91-5884    [000] d..2.   454.578961: sched_waking: "
			       "comm=cc1 pid=18439 prio=120 target_cpu=001", &pr), 0);
	assert_int_equal(pr.pid, 5884);
	assert_int_equal(bundle.ev[0].sched_waking->pid, 18439);
}

/*
 * prctl(PR_SET_NAME, "ev il-1 [0]"): the name holds a whole fake "-<pid>
 * [<cpu>]". Found by reading a real trace while writing the fuzz target:
 * the parser took the first " [<digits>]" and gave the event to pid 1.
 */
static void test_name_imitates_header(void **state)
{
	struct ft_line pr;
	bundle.n = 0;
	assert_int_equal(parse("     ev il-1 [0]-18548   [001] .....   455.269072: task_rename: "
			       "pid=18548 oldcomm=bash newcomm=ev il-1 [0] oom_score_adj=0", &pr), 0);
	assert_int_equal(pr.pid, 18548);
	assert_int_equal(pr.cpu, 1);
	assert_string_equal(bundle.ev[0].task_rename->newcomm, "ev il-1 [0]");
	/* A name that brings its own flags and timestamp still cannot. */
	assert_int_equal(parse("  x-1 [0] . 1.1:-18548   [001] .....   455.269072: sched_process_exit: "
			       "comm=x-1 [0] . 1.1: pid=18548 prio=120", &pr), 0);
	assert_int_equal(pr.pid, 18548);
	assert_int_equal(pr.cpu, 1);
	assert_int_equal(bundle.ev[1].sched_process_exit->pid, 18548);
}

static void test_malformed(void **state)
{
	struct ft_line pr;
	bundle.n = 0;
	/* No pid column at 16, no timestamp, unknown event, fields cut short. */
	assert_int_not_equal(parse("a-1 [000] ..... 1.2: sched_switch: prev_comm=a", &pr), 0);
	assert_int_not_equal(parse("             cc1-18439   [001] d..2.   x: sched_switch: ", &pr), 0);
	assert_int_not_equal(parse("             cc1-18439   [001] d..2.   1.5: nosuch: a=1", &pr), 0);
	assert_int_not_equal(parse("             cc1-18439   [001] d..2.   1.5: sched_switch: "
				   "prev_comm=cc1 prev_pid=1", &pr), 0);
	assert_int_not_equal(parse("", &pr), 0);
	assert_int_equal(bundle.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_dash_in_name),
		cmocka_unit_test(test_name_imitates_header),
		cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
