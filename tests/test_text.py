from common.text import aligned, markdown_table


def test_aligned_puts_text_left_and_numbers_right_without_trailing_spaces():
    text = aligned(["kernel", "time"], [["gemm", "1.5"], ["elementwise_add", "12.25"]], left={"kernel"})
    assert text.splitlines() == ["kernel            time",
                                 "gemm               1.5",
                                 "elementwise_add  12.25"]


def test_aligned_cuts_the_padding_of_a_left_column_at_the_end():
    assert aligned(["n", "name"], [["10", "a"], ["2", "longer"]], left={"name"}).splitlines() == [
        " n  name", "10  a", " 2  longer"]


def test_markdown_table_pads_every_column_to_its_widest_cell():
    assert markdown_table(["a", "bb"], [["xyz", "1"]]).splitlines() == ["| a   | bb |", "|-----|----|", "| xyz | 1  |"]
